"""Slow clients, the open file limit and closing connections: --request-timeout (a
deadline for a whole request that reads do not reset), --maxclients-port-share (one
face cannot lock the other out), --maxclients fitted to the open file limit, and the
slot of a closed connection given back at once."""

import re
import resource
import socket
import time

from conftest import Sluiced, free_port


def recv_until_closed(sock, timeout):
    """Everything the server sends until it closes; fails if it has not within timeout."""
    sock.settimeout(timeout)
    got = b""
    deadline = time.monotonic() + timeout
    while True:
        assert time.monotonic() < deadline, "not closed within %ss; got %r" % (timeout, got)
        try:
            data = sock.recv(4096)
        except ConnectionResetError:
            return got
        if not data:
            return got
        got += data


def trickle(sock, data, every=0.25, limit=12.0):
    """Sends data a byte at a time, one every `every` seconds, then more b"x" bytes the
    same way, until the server answers or closes; returns what it answered. Each byte is
    a read that would reset an idle timeout."""
    sock.settimeout(every)
    got = b""
    deadline = time.monotonic() + limit
    i = 0
    while True:
        assert time.monotonic() < deadline, "not answered within %ss; got %r" % (limit, got)
        try:
            sock.sendall(data[i:i + 1] if i < len(data) else b"x")
            i += 1
            got = sock.recv(4096)
            return got
        except socket.timeout:
            pass
        except (BrokenPipeError, ConnectionResetError):
            return got


def connect_served(s, timeout=10):
    """A connection that PING answered. A refusal is tried again: the server may not have
    seen the close of a connection just before (the harness's own, at start) by the time it
    accepts the next; a refusal that lasts fails."""
    deadline = time.monotonic() + timeout
    while True:
        c = s.conn()
        c.send_command("PING")
        r = c.read_reply()
        if r == "PONG":
            return c
        c.close()
        assert time.monotonic() < deadline, "refused for %ss: %r" % (timeout, r)
        time.sleep(0.05)


def test_request_timeout_resp(make_server):
    s = make_server(args=["--request-timeout", "1", "--idle-timeout", "30"])
    with socket.create_connection(s.addr) as c:
        # A command whose bytes keep coming, never complete: the reads do not save it.
        got = trickle(c, b"*2\r\n$4\r\nECHO\r\n$100000\r\n")
        got += recv_until_closed(c, 10)
    assert got == b"-ERR request not complete within --request-timeout (1 s)\r\n", got
    assert re.search(r"client \d+ \(RESP\): request not complete within --request-timeout "
                     r"\(1 s\); closing", s.stderr()), s.stderr()
    s.assert_serving()


def test_request_timeout_http(make_server):
    port = free_port()
    s = make_server(args=["--http-port", str(port), "--request-timeout", "1"])
    with socket.create_connection(("127.0.0.1", port)) as c:
        got = trickle(c, b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"y" * 1000)
        got += recv_until_closed(c, 10)
    head, _, body = got.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 408 "), got
    assert b"request not complete within --request-timeout (1 s)" in body, got
    assert re.search(r"client \d+ \(HTTP\): request not complete", s.stderr()), s.stderr()


def test_request_timeout_spares_idle_and_complete(make_server):
    """The deadline is a request's: a connection between requests, or one whose requests
    each complete, is not closed by it."""
    s = make_server(args=["--request-timeout", "1"])
    with s.conn() as idle, s.conn() as busy:
        t_end = time.monotonic() + 2.5
        while time.monotonic() < t_end:
            # Each command in two pieces, the second soon after the first: complete.
            busy.send(b"*1\r\n$4\r\nPI")
            time.sleep(0.1)
            busy.send(b"NG\r\n")
            assert busy.read_reply() == "PONG"
        assert idle.call("PING") == "PONG", "a connection between requests has no deadline"
        assert busy.call("PING") == "PONG"


def test_request_timeout_zero_is_off(make_server):
    s = make_server(args=["--request-timeout", "0"])
    with s.conn() as c:
        c.send(b"*1\r\n$4\r\nPI")
        time.sleep(2.5)
        c.send(b"NG\r\n")
        assert c.read_reply() == "PONG", "--request-timeout 0: no deadline"


def test_port_share(make_server):
    """Slow clients that fill the RESP port's share leave HTTP clients room, and the
    refusal names the share."""
    port = free_port()
    s = make_server(args=["--http-port", str(port), "--maxclients", "10",
                          "--maxclients-port-share", "40"])
    held = []
    try:
        for _ in range(4):
            held.append(connect_served(s))
        with s.conn() as c:
            got = c.wait_closed(5)
        assert got == (b"-ERR max number of clients reached on the RESP port "
                       b"(4: --maxclients-port-share 40 of --maxclients 10)\r\n"), got
        for _ in range(4):
            h = socket.create_connection(("127.0.0.1", port))
            h.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            h.settimeout(5)
            assert h.recv(100).startswith(b"HTTP/1.1 200 "), "HTTP served beside a full RESP port"
            held.append(h)
        h = socket.create_connection(("127.0.0.1", port))
        h.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        got = recv_until_closed(h, 5)
        h.close()
        assert got.startswith(b"HTTP/1.1 503 ") and b"on the HTTP port" in got, got
    finally:
        for c in held:
            c.close()


def test_port_share_needs_both_ports(make_server):
    """With one port on, it may hold all of --maxclients."""
    s = make_server(args=["--maxclients", "4", "--maxclients-port-share", "50"])
    held = []
    try:
        for _ in range(4):
            held.append(connect_served(s))
    finally:
        for c in held:
            c.close()


def test_closed_connection_gives_its_slot_back(make_server):
    """Back-to-back short connections at --maxclients 1: each one is served, since the one
    before it has closed (the server saw it close before it saw the next connect)."""
    s = make_server(args=["--maxclients", "1", "--threads", "1"])
    refused = 0
    for _ in range(200):
        with socket.create_connection(s.addr) as c:
            c.settimeout(5)
            c.sendall(b"*1\r\n$4\r\nPING\r\n")
            got = c.recv(100)
            if got != b"+PONG\r\n":
                refused += 1
    assert refused == 0, "%d of 200 back-to-back connections refused at --maxclients 1" % refused


class LimitedSluiced(Sluiced):
    """A sluiced started under a lowered open file limit (soft and hard)."""

    nofile = 128

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        n = self.nofile
        self.preexec = lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (n, n))


def test_maxclients_fits_the_fd_limit(tmp_path):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    clients = 300
    if soft < clients + 64:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, clients + 64), hard))
    s = LimitedSluiced(workdir=str(tmp_path)).start()
    socks = []
    try:
        m = re.search(r"--maxclients 10000 lowered to (\d+): the open file limit \(ulimit -n\) "
                      r"is 128", s.stderr())
        assert m, s.stderr()
        fit = int(m.group(1))
        assert 0 < fit < 128
        # Held through the burst: a slot of its own, counted below.
        info_conn = s.conn()
        socks.append(info_conn.sock)
        info = info_conn.call("INFO", "clients").decode()
        assert "maxclients:%d" % fit in info, info
        for _ in range(clients):
            socks.append(socket.create_connection(s.addr))
        served = refused = 0
        burst = socks[1:]
        for c in burst:
            c.sendall(b"*1\r\n$4\r\nPING\r\n")
        for c in burst:
            c.settimeout(10)
            got = c.recv(100)
            if got == b"+PONG\r\n":
                served += 1
            else:
                assert got == b"-ERR max number of clients reached\r\n", \
                    "neither served nor told why: %r" % got
                refused += 1
        assert served == fit - 1 and refused == clients - served, (served, refused)
        assert "refused: max number of clients reached (--maxclients %d)" % fit in s.stderr()
    finally:
        for c in socks:
            c.close()
        s.stop()
