"""Big pipelines and the per-client output limit (--client-output-buffer-limit).

A client may write a whole pipeline before it reads a single reply (redis-py's pipeline()
does). sluiced keeps reading it, however many replies it owes, so that neither side waits
for the other; what bounds the memory is the output limit, as Redis's
client-output-buffer-limit: past the hard limit, or past the soft one for longer than its
seconds, the client is closed with a log line that names the limit."""

import re
import socket
import subprocess
import time

N = 500_000
# One key, a burst far above N and a refill of one token every 6 minutes: every take is
# allowed, and `remaining` counts down by one a command, so the replies prove their order.
BURST = 999_999


def _encode(*args):
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


def _wait_for_log(srv, text, timeout=20):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if text in srv.stderr():
            return True
        time.sleep(0.05)
    return False


def test_redis_py_pipeline_of_500000_commands(make_server):
    srv = make_server()
    r = srv.redis()  # socket_timeout 10: a server that stops reading fails the test
    p = r.pipeline(transaction=False)
    for _ in range(N):
        p.execute_command("CL.THROTTLE", "pipe:redis-py", BURST, 10, 3600)
    got = p.execute()
    assert len(got) == N
    for i, reply in enumerate(got):
        assert reply[:4] == [0, BURST + 1, BURST - i, -1], (i, reply)
    r.close()
    srv.assert_serving()


def test_raw_client_that_writes_everything_before_reading(make_server):
    srv = make_server()
    cmd = _encode("CL.THROTTLE", "pipe:raw", BURST, 10, 3600)
    s = socket.create_connection(srv.addr, timeout=60)
    try:
        s.sendall(cmd * N + _encode("PING"))  # every command, before any reply is read
        buf = bytearray()
        while not buf.endswith(b"+PONG\r\n"):
            chunk = s.recv(1 << 20)
            assert chunk, "the server closed the connection after %d bytes" % len(buf)
            buf += chunk
    finally:
        s.close()
    replies = re.findall(rb"\*5\r\n:(\d+)\r\n:(\d+)\r\n:(\d+)\r\n:(-?\d+)\r\n:\d+\r\n", buf)
    assert len(replies) == N
    expected = [(b"0", b"%d" % (BURST + 1), b"%d" % (BURST - i), b"-1") for i in range(N)]
    assert replies == expected
    srv.assert_serving()


def _flood_without_reading(srv, pause=0.0, timeout=60):
    """Sends ECHOs of 1000 bytes and never reads a reply, until the server closes the
    connection; returns whether it did within `timeout`."""
    s = socket.create_connection(srv.addr, timeout=10)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    batch = _encode("ECHO", b"x" * 1000) * 50
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            s.sendall(batch)
            if pause:
                time.sleep(pause)
    except OSError:  # reset or broken pipe: closed by the server
        return True
    finally:
        s.close()
    return False


def test_a_client_past_the_hard_limit_is_closed(make_server):
    srv = make_server(["--client-output-buffer-limit", "1m 0 0"])
    assert _flood_without_reading(srv)
    assert _wait_for_log(srv, "over the hard limit of --client-output-buffer-limit (1048576)")
    srv.assert_serving()  # the others are served on


def test_a_client_past_the_soft_limit_for_too_long_is_closed(make_server):
    srv = make_server(["--client-output-buffer-limit", "1g 1m 1"])
    # About 1 MB/s: over the soft limit for more than a second well before the hard one.
    assert _flood_without_reading(srv, pause=0.05)
    assert _wait_for_log(srv, "over the soft limit of --client-output-buffer-limit (1048576) "
                              "for more than 1 s")
    assert "over the hard limit" not in srv.stderr()
    srv.assert_serving()


def test_a_client_that_reads_its_replies_is_never_closed_by_the_soft_limit(make_server):
    """The soft limit's clock restarts once a client has taken its replies: a client that
    pipelines in bursts over the soft limit, but reads each burst, stays."""
    srv = make_server(["--client-output-buffer-limit", "64m 64k 1"])
    burst = _encode("ECHO", b"y" * 1000) * 300  # 300 KB of replies a burst, over 64k
    with srv.conn(timeout=30) as c:
        for _ in range(10):  # 3 s in all, each burst over the soft limit
            c.sock.sendall(burst)
            for _ in range(300):
                assert c.read_reply() == b"y" * 1000
            time.sleep(0.3)
        assert c.call("PING") == "PONG"
    assert "over the soft limit" not in srv.stderr()


def test_bad_limits_are_refused_naming_the_flag(make_server):
    srv = make_server(start=False)
    for bad in ["1m", "1m 2m 0", "1k 0 0", "1m 1k 0", "1m 0 x", "1m 0 0 0", "-1m 0 0"]:
        p = subprocess.run([srv.binary, "--port", "0", "--http-port", "1",
                            "--client-output-buffer-limit", bad],
                           capture_output=True, timeout=20)
        assert p.returncode == 2, bad
        assert b"invalid value '%s' for --client-output-buffer-limit" % bad.encode() in p.stderr


def test_the_limit_from_the_config_file(make_server, tmp_path):
    conf = tmp_path / "sluice.yaml"
    conf.write_text("server:\n  client-output-buffer-limit: 1m 0 0\n")
    srv = make_server(["--config", str(conf)])
    assert _flood_without_reading(srv)
    assert _wait_for_log(srv, "over the hard limit of --client-output-buffer-limit (1048576)")
    srv.assert_serving()
