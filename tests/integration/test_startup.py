"""Start-up: what sluiced refuses before it serves (a port another process holds, the same
port twice, nothing to serve), and what it says when it starts."""

import os
import socket
import subprocess

from conftest import SANITIZER_MARKS, binary, free_port

BIN = binary("SLUICED", "sluiced")


def refused(*args, timeout=30):
    """Runs sluiced with args, which must make it exit by itself: returns (status, stderr).
    A server that starts instead is killed, and the test fails."""
    try:
        p = subprocess.run([BIN, "--threads", "2", "--bind", "127.0.0.1"] + [str(a) for a in args],
                           stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        raise AssertionError("sluiced %s started instead of refusing; stderr:\n%s"
                             % (args, (e.stderr or b"").decode("utf-8", "replace")))
    err = p.stderr.decode("utf-8", "replace")
    for mark in SANITIZER_MARKS:
        assert mark not in err, err
    return p.returncode, err


def test_a_second_server_on_the_same_port_is_refused(make_server):
    first = make_server()
    with first.conn() as c:
        assert c.call("SL.TAKE", "startup:one", 1, 3600)[1] == 1
    rc, err = refused("--port", first.port, "--http-port", 0)
    assert rc != 0
    assert "127.0.0.1:%d" % first.port in err and "Address already in use" in err, err
    # Every client still reaches the first server's store: the key stays taken.
    for _ in range(20):
        with first.conn() as c:
            assert c.call("SL.TAKE", "startup:one", 1, 3600)[1] == 0


def test_a_port_held_with_so_reuseport_by_another_program_is_refused():
    """SO_REUSEPORT on sluiced's sockets let it join any same-user listener that also
    set it, and share its clients."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as other:
        other.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        other.bind(("127.0.0.1", 0))
        other.listen(16)
        port = other.getsockname()[1]
        rc, err = refused("--port", 0, "--http-port", port)
    assert rc != 0
    assert "127.0.0.1:%d (HTTP): Address already in use" % port in err, err


def test_the_same_port_for_resp_and_http_is_refused():
    port = free_port()
    rc, err = refused("--port", port, "--http-port", port)
    assert rc != 0
    assert "127.0.0.1:%d" % port in err and "Address already in use" in err, err


def test_both_ports_off_is_refused():
    rc, err = refused("--port", 0, "--http-port", 0)
    assert rc != 0
    assert "nothing to serve" in err, err


def start_line(srv):
    lines = [l for l in srv.stderr().splitlines() if " INFO sluiced " in l]
    assert lines, srv.stderr()
    return lines[0]


def test_a_listener_turned_off_is_logged_as_off(make_server):
    s = make_server()  # the harness gives --http-port 0
    line = start_line(s)
    assert "RESP on 127.0.0.1:%d" % s.port in line and "HTTP off" in line, line


def test_an_ipv6_address_is_logged_in_brackets(make_server):
    s = make_server(args=["--bind", "::1"], start=False)
    s.bind_flag = False
    s.host = "::1"
    s.start()
    assert "RESP on [::1]:%d" % s.port in start_line(s)
