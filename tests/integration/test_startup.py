"""Start-up: what sluiced refuses before it serves (a port another process holds, the same
port twice, nothing to serve), and what it says when it starts."""

import os
import socket
import subprocess

import pytest

from conftest import SANITIZER_MARKS, Error, binary, free_port

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


WARNING = "not a loopback address, without --requirepass"


def test_a_non_loopback_address_without_a_password_is_warned_about():
    """Said before binding: 192.0.2.1 (TEST-NET-1) is no address of this machine, so the
    bind then fails, and nothing listens beyond 127.0.0.1."""
    rc, err = refused("--port", free_port(), "--http-port", 0, "--bind", "192.0.2.1")
    assert rc != 0
    assert "WARN will listen on 192.0.2.1, " + WARNING in err, err
    rc, err = refused("--port", free_port(), "--http-port", 0, "--bind", "192.0.2.1",
                      "--requirepass", "secret")
    assert rc != 0 and WARNING not in err, err


def test_loopback_addresses_are_not_warned_about(make_server):
    assert WARNING not in make_server().stderr()
    s = make_server(args=["--bind", "127.0.0.2"], start=False)
    s.bind_flag = False
    s.host = "127.0.0.2"
    s.start()
    assert WARNING not in s.stderr(), s.stderr()


def reload(srv, n):
    """SIGHUP until the n-th reload is logged: one sent while the previous reload is being
    applied is refused ("try again")."""
    import time
    deadline = time.monotonic() + 20
    while srv.stderr().count("SIGHUP: reloaded") < n:
        assert srv.alive() and time.monotonic() < deadline, srv.stderr()
        srv.proc.send_signal(1)
        time.sleep(0.2)


POLICY = "policies:\n  api: {limit: 5, period: 1m}\n"


def test_sighup_names_the_server_settings_that_need_a_restart(make_server, tmp_path):
    conf = tmp_path / "sluice.yaml"
    conf.write_text("server:\n  max_key_bytes: 512\n  idle_timeout: 0\n" + POLICY)
    s = make_server(args=["--config", str(conf)])
    reload(s, 1)
    assert "take effect at the next start" not in s.stderr(), "unchanged, yet warned"
    conf.write_text("server:\n  max_key_bytes: 1024\n  maxclients: 10\n" + POLICY)
    reload(s, 2)
    warn = [l for l in s.stderr().splitlines() if "take effect at the next start" in l]
    assert len(warn) == 1 and " WARN " in warn[0], s.stderr()
    assert "max-key-bytes, maxclients, idle-timeout changed in %s" % conf in warn[0], warn
    with s.conn() as c:  # the setting of the start holds: 600 bytes is too long a key
        with pytest.raises(Error, match="too long"):
            c.call("SL.TAKE", "k" * 600, 1, 60)
        assert c.call("SL.POLICY", "api", "k")[1] == 1


def test_a_snapshot_path_from_the_file_outlives_a_reload(make_server, tmp_path):
    """The server's settings pointed into the config they came in, which a reload frees:
    the shutdown then wrote the snapshot to a freed path (AddressSanitizer aborts)."""
    snap = tmp_path / "from-file.snapshot"
    conf = tmp_path / "sluice.yaml"
    conf.write_text("server:\n  snapshot: %s\n  snapshot_interval: 0\n%s" % (snap, POLICY))
    s = make_server(args=["--config", str(conf)])
    reload(s, 3)  # a reload frees the previous config once the workers have moved on
    assert s.stop() == 0
    assert "snapshot written to %s (shutdown)" % snap in s.stderr()
    assert snap.stat().st_size > 0
