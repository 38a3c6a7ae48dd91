"""`sluice take`: in-process, and against a real sluiced."""

import json
import re

import pytest

from conftest import Sluiced, run


def fields(out):
    """The decision block: {name: int}."""
    d = {}
    for line in out.splitlines():
        m = re.match(r"^(allowed|limit|remaining|retry_after_ms|reset_after_ms|delay_ms)\s+(-?\d+)$",
                     line)
        if m:
            d[m.group(1)] = int(m.group(2))
    return d


def headers(out):
    h = {}
    for line in out.splitlines():
        if ": " in line and not line.startswith("take "):
            k, v = line.split(": ", 1)
            h[k] = v
    return h


def test_in_process_first_take_is_allowed():
    p = run("take", "user:42", "--limit", 10, "--period", "1m", check=0)
    d = fields(p.stdout)
    assert d == {"allowed": 1, "limit": 10, "remaining": 9, "retry_after_ms": 0,
                 "reset_after_ms": 6000}
    assert "HTTP/1.1 200 OK" in p.stdout
    h = headers(p.stdout)
    assert h["X-RateLimit-Limit"] == "10"
    assert h["X-RateLimit-Remaining"] == "9"
    assert h["X-RateLimit-Reset"] == "6"
    assert h["RateLimit-Policy"] == '"default";q=10;w=60'
    assert h["RateLimit"] == '"default";r=9;t=6'
    assert "Retry-After" not in h
    # The body, as sluiced's HTTP face writes it (the same writer, src/proto/http.h).
    body = json.loads(p.stdout.strip().splitlines()[-1])
    assert body == {"allowed": True, "limit": 10, "remaining": 9, "retry_after_ms": 0,
                    "reset_after_ms": 6000}
    assert int(h["Content-Length"]) == len(p.stdout.strip().splitlines()[-1])


def test_in_process_repeat_until_rejected():
    p = run("take", "k", "--limit", 3, "--period", "10s", "--repeat", 5, check=0)
    lines = [l for l in p.stdout.splitlines() if l.startswith("take ")]
    assert [l.split()[2] for l in lines] == ["allowed", "allowed", "allowed", "rejected", "rejected"]
    d = fields(p.stdout)
    assert d["allowed"] == 0 and d["remaining"] == 0
    assert 3300 <= d["retry_after_ms"] <= 3334
    assert "HTTP/1.1 429 Too Many Requests" in p.stdout
    assert headers(p.stdout)["Retry-After"] == "4"


@pytest.mark.parametrize("alg", ["gcra", "token_bucket", "leaky_bucket", "fixed_window",
                                 "sliding_log", "sliding_window"])
def test_in_process_every_algorithm(alg):
    p = run("take", "k", "--limit", 2, "--period", "1s", "--algorithm", alg, "--repeat", 3, check=0)
    lines = [l for l in p.stdout.splitlines() if l.startswith("take ")]
    assert [l.split()[2] for l in lines] == ["allowed", "allowed", "rejected"]
    assert ("delay_ms" in p.stdout) == (alg == "leaky_bucket")


def test_in_process_cost_beyond_burst_never_fits():
    p = run("take", "k", "--limit", 5, "--period", "1s", "--cost", 6, check=0)
    d = fields(p.stdout)
    assert d["allowed"] == 0 and d["retry_after_ms"] == -1
    assert "Retry-After" not in headers(p.stdout)


def test_fractional_period_policy_header():
    p = run("take", "k", "--limit", 10, "--period", "500ms", check=0)
    assert headers(p.stdout)["RateLimit-Policy"] == '"default";q=20;w=1'


@pytest.mark.parametrize("args,flag", [
    (["--limit", "3", "--period", "1s"], "KEY"),
    (["k", "--period", "1s"], "--limit"),
    (["k", "--limit", "3"], "--period"),
    (["k", "--limit", "3", "--period", "1s", "--algorithm", "concurrency"], "--algorithm"),
    (["k", "--limit", "3", "--period", "1s", "--cost", "-2"], "--cost"),
    (["k", "--limit", "3", "--period", "1s", "--repeat", "0"], "--repeat"),
    (["k", "--limit", "3", "--period", "1s", "--http"], "--http"),
    (["k", "j", "--limit", "3", "--period", "1s"], "'j'"),
    (["k", "--limit", "3", "--period", "1s", "--nope"], "--nope"),
    (["--server", "127.0.0.1:1", "k", "--limit", "3", "--period", "1500us"], "--period"),
])
def test_bad_flags(args, flag):
    p = run("take", *args, check=2)
    assert flag in p.stderr


def test_unreachable_server_fails_with_1():
    from conftest import free_port
    p = run("take", "--server", "127.0.0.1:%d" % free_port(), "k", "--limit", 3, "--period", "1s",
            check=1)
    assert "cannot connect" in p.stderr


def test_against_sluiced_resp(sluiced):
    p = run("take", "--server", sluiced.addr, "cli:take:1", "--limit", 3, "--period", "10s",
            "--repeat", 4, check=0)
    lines = [l for l in p.stdout.splitlines() if l.startswith("take ")]
    assert [l.split()[2] for l in lines] == ["allowed", "allowed", "allowed", "rejected"]
    d = fields(p.stdout)
    assert d["allowed"] == 0 and d["limit"] == 3 and d["remaining"] == 0
    assert 0 < d["retry_after_ms"] <= 3334
    assert "HTTP/1.1 429 Too Many Requests" in p.stdout
    # The state lives in the server: another take still sees the key spent.
    p = run("take", "--server", sluiced.addr, "cli:take:1", "--limit", 3, "--period", "10s", check=0)
    assert fields(p.stdout)["allowed"] == 0


@pytest.mark.parametrize("alg", ["sliding_window", "leaky_bucket", "fixed_window"])
def test_against_sluiced_algorithms(sluiced, alg):
    p = run("take", "--server", sluiced.addr, "cli:take:" + alg, "--limit", 5, "--period", "1m",
            "--algorithm", alg, "--cost", 2, check=0)
    d = fields(p.stdout)
    assert d["allowed"] == 1 and d["limit"] == 5 and d["remaining"] == 3


def test_against_sluiced_error_reply(sluiced):
    # A key longer than the server's 512 bytes: the server's ERR is shown, exit 1.
    p = run("take", "--server", sluiced.addr, "k" * 600, "--limit", 3, "--period", "1s", check=1)
    assert "ERR" in p.stderr


def test_against_sluiced_http():
    s = Sluiced(http=True).start()
    s.require_http()
    try:
        p = run("take", "--server", "127.0.0.1:%d" % s.http_port, "--http", "cli:http",
                "--limit", 2, "--period", 60, check=0)
        first = p.stdout.splitlines()[0]
        if first.startswith("HTTP/1.1 501"):
            pytest.skip("this sluiced does not serve /v1/check yet")
        assert first == "HTTP/1.1 200 OK"
        assert "X-RateLimit-Limit: 2" in p.stdout
        assert '"allowed":true' in p.stdout
    finally:
        s.stop()


def test_a_server_with_a_password():
    """SLUICE_PASSWORD: AUTH over RESP, a bearer token over HTTP; without it, or wrong, the
    server's refusal is shown and the exit status is 1."""
    s = Sluiced(http=True, extra=["--requirepass", "cli-s3cret"]).start()
    try:
        resp = ["take", "--server", s.addr, "cli:pw", "--limit", 3, "--period", "10s"]
        p = run(*resp, check=1)
        assert "NOAUTH" in p.stderr
        p = run(*resp, check=1, env={"SLUICE_PASSWORD": "wrong"})
        assert "AUTH (SLUICE_PASSWORD) refused: WRONGPASS" in p.stderr, p.stderr
        p = run(*resp, check=0, env={"SLUICE_PASSWORD": "cli-s3cret"})
        assert fields(p.stdout)["remaining"] == 2
        http = ["take", "--server", "127.0.0.1:%d" % s.http_port, "--http", "cli:pw", "--limit",
                3, "--period", 10]
        assert run(*http, check=0).stdout.startswith("HTTP/1.1 401")
        p = run(*http, check=0, env={"SLUICE_PASSWORD": "cli-s3cret"})
        assert p.stdout.startswith("HTTP/1.1 200") and "X-RateLimit-Remaining: 1" in p.stdout
        p = run(*resp, check=2, env={"SLUICE_PASSWORD": "two words"})
        assert "SLUICE_PASSWORD holds a space" in p.stderr
    finally:
        s.stop()


def cell(out):
    d = {}
    for line in out.splitlines():
        m = re.match(r"^(limited|limit|remaining|retry_after_s|reset_after_s)\s+(-?\d+)$", line)
        if m:
            d[m.group(1)] = int(m.group(2))
    return [d["limited"], d["limit"], d["remaining"], d["retry_after_s"], d["reset_after_s"]]


def test_cl_throttle_in_process_as_redis_cell():
    # redis-cell's README: CL.THROTTLE user123 15 30 60 1 -> 0 16 15 -1 2
    p = run("take", "user123", "--command", "cl.throttle", "--burst", 16, "--limit", 30,
            "--period", 60, check=0)
    assert cell(p.stdout) == [0, 16, 15, -1, 2]
    assert headers(p.stdout)["X-RateLimit-Limit"] == "16"


def test_cl_throttle_against_sluiced(sluiced):
    p = run("take", "--server", sluiced.addr, "cli:cell", "--command", "cl.throttle", "--burst", 16,
            "--limit", 30, "--period", 60, check=0)
    assert cell(p.stdout) == [0, 16, 15, -1, 2]
    p = run("take", "--server", sluiced.addr, "cli:cell2", "--command", "cl.throttle", "--limit", 2,
            "--period", 3600, "--repeat", 3, check=0)
    lines = [l for l in p.stdout.splitlines() if l.startswith("take ")]
    assert [l.split()[2] for l in lines] == ["0", "0", "1"]
    v = cell(p.stdout)
    assert v[0] == 1 and v[1] == 2 and v[2] == 0 and v[3] > 0
    assert "HTTP/1.1 429 Too Many Requests" in p.stdout


@pytest.mark.parametrize("extra,flag", [
    (["--algorithm", "gcra"], "--algorithm"),
    (["--period", "1500ms"], "--period"),
    (["--server", "127.0.0.1:1", "--http"], "--http"),
    (["--command", "cl.thrott"], "--command"),
])
def test_cl_throttle_bad_flags(extra, flag):
    args = ["k", "--command", "cl.throttle", "--limit", 3, "--period", 60]
    if "--command" in extra:
        args = ["k", "--limit", 3, "--period", 60]
    if "--period" in extra:
        args = ["k", "--command", "cl.throttle", "--limit", 3]
    p = run("take", *(args + extra), check=2)
    assert flag in p.stderr


@pytest.mark.parametrize("cmd", ["take", "simulate"])
def test_burst_zero_is_refused_as_every_face_refuses_it(cmd):
    # The servers refuse BURST 0 / burst=0 (0 would otherwise mean the limit); so does the CLI.
    args = ["user:42"] if cmd == "take" else []
    p = run(cmd, *args, "--limit", 10, "--period", "1m", "--burst", 0, check=2)
    assert "--burst: '0' is not a positive integer" in p.stderr, p.stderr


def test_algorithm_names_ignore_case():
    p = run("take", "user:42", "--limit", 10, "--period", "1m", "--algorithm", "Token_Bucket",
            "--burst", 1, check=0)
    d = fields(p.stdout)
    assert (d["allowed"], d["limit"], d["remaining"]) == (1, 1, 0), p.stdout


class Canned:
    """A TCP server on a free 127.0.0.1 port that reads a request and answers every
    connection with the same bytes, then closes it: responses sluiced would never send."""

    def __init__(self, answer):
        import socket
        import threading
        self.answer = answer
        self.srv = socket.socket()
        self.srv.bind(("127.0.0.1", 0))
        self.srv.listen(8)
        self.srv.settimeout(0.2)
        self.port = self.srv.getsockname()[1]
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self):
        while not self.stop.is_set():
            try:
                c, _ = self.srv.accept()
            except OSError:
                continue
            with c:
                c.settimeout(5)
                try:
                    c.recv(65536)
                    c.sendall(self.answer)
                except OSError:
                    pass

    def close(self):
        self.stop.set()
        self.thread.join(timeout=5)
        self.srv.close()


def take_http_from(answer):
    srv = Canned(answer)
    try:
        return run("take", "--server", "127.0.0.1:%d" % srv.port, "--http", "k", "--limit", 1,
                   "--period", 1)
    finally:
        srv.close()


def test_http_response_read_as_framed():
    """The response is read by its Content-Length: what follows it is not printed."""
    p = take_http_from(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}EXTRA")
    assert p.returncode == 0, p.stderr
    assert p.stdout == "HTTP/1.1 200 OK\nContent-Length: 2\n\n{}\n"
    # Without a Content-Length, the body is what comes until the server closes.
    p = take_http_from(b"HTTP/1.0 200 OK\r\n\r\nall of it")
    assert p.returncode == 0 and p.stdout == "HTTP/1.0 200 OK\n\nall of it\n"


@pytest.mark.parametrize("answer,why", [
    (b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n{}", "in the middle of its response"),
    (b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n", "in the middle of its response"),
    (b"", "without an answer"),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n",
     "malformed HTTP response: transfer-encoding is not supported"),
    (b"HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999\r\n\r\n",
     "malformed HTTP response: invalid content-length"),
    (b"-ERR this is RESP\r\n", "malformed HTTP response: malformed status line"),
])
def test_http_response_that_is_not_whole(answer, why):
    p = take_http_from(answer)
    assert p.returncode == 1, p.stdout
    assert why in p.stderr, p.stderr
