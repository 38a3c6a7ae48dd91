"""What each port protects: with --requirepass (or --http-token) every HTTP path but /healthz
and --http-open's wants `Authorization: Bearer <token>`; --http-bind puts HTTP on an address of
its own; before AUTH, a RESP command may hold no more than a login needs (Redis's caps)."""

import socket

import pytest
import requests

from conftest import free_port
from respclient import Conn, Error, as_map


def start(make_server, *args, password=None):
    http = free_port()
    s = make_server(args=["--http-port", str(http)] + list(args), password=password)
    s.url = "http://127.0.0.1:%d" % http
    s.http = http
    return s


def check(s, key, headers=None):
    return requests.get(s.url + "/v1/check", params={"key": key, "limit": 5, "period": 60},
                        headers=headers or {})


def test_http_wants_the_password_as_a_bearer_token(make_server):
    s = start(make_server, password="s3cret")
    r = check(s, "k1")
    assert r.status_code == 401, r.text
    assert r.headers["WWW-Authenticate"] == 'Bearer realm="sluice"'
    assert r.json()["field"] == "authorization"
    for bad in ("Bearer wrong", "Basic czNjcmV0", "Bearer s3cret2", "Bearer", "s3cret"):
        assert check(s, "k1", {"Authorization": bad}).status_code == 401, bad
    with s.conn() as c:
        c.call("AUTH", "s3cret")
        assert c.call("SL.INSPECT", "k1") is None, "a refused request takes nothing"
    r = check(s, "k1", {"Authorization": "Bearer s3cret"})
    assert r.status_code == 200 and r.json()["remaining"] == 4, r.text
    assert check(s, "k1", {"Authorization": "bearer   s3cret"}).status_code == 200
    # /healthz is open, /metrics and forward-auth are not
    assert requests.get(s.url + "/healthz").status_code == 200
    assert requests.get(s.url + "/metrics").status_code == 401
    assert requests.get(s.url + "/v1/auth/api").status_code == 401
    assert requests.post(s.url + "/v1/check", json={"key": "k1", "limit": 5,
                                                    "period": 60}).status_code == 401
    assert "(bearer token)" in s.stderr()


def test_http_open_leaves_the_paths_it_names_open(make_server):
    s = start(make_server, "--http-open", "/metrics,/v1/auth/", password="pw")
    assert requests.get(s.url + "/metrics").status_code == 200
    r = requests.get(s.url + "/v1/auth/nope", headers={"X-Api-Key": "u1"})
    assert r.status_code == 400 and "WWW-Authenticate" not in r.headers, r.text  # unknown policy
    assert requests.get(s.url + "/metricsx").status_code == 401, "a path, not a prefix"
    assert check(s, "k2").status_code == 401


def test_http_token_of_its_own(make_server):
    # a token of HTTP's own, beside the RESP password
    s = start(make_server, "--http-token", "tok", password="pw")
    assert check(s, "k3", {"Authorization": "Bearer pw"}).status_code == 401
    assert check(s, "k3", {"Authorization": "Bearer tok"}).status_code == 200
    # and a token with no RESP password: RESP stays open
    s2 = start(make_server, "--http-token", "tok")
    assert check(s2, "k4").status_code == 401
    assert check(s2, "k4", {"Authorization": "Bearer tok"}).status_code == 200
    with s2.conn() as c:
        assert as_map(c.call("SL.TAKE", "k4", 5, 60))["remaining"] == 3


def test_without_a_password_http_is_open(make_server):
    s = start(make_server)
    assert check(s, "k5").status_code == 200


def test_http_bind_puts_http_on_its_own_address(make_server):
    # RESP on 127.0.0.1, HTTP on 127.0.0.2 (the loopback range), on the same port number
    port = free_port()
    s = make_server(args=["--http-port", str(port), "--http-bind", "127.0.0.2"])
    r = requests.get("http://127.0.0.2:%d/healthz" % port)
    assert r.status_code == 200
    with pytest.raises(requests.ConnectionError):
        requests.get("http://127.0.0.1:%d/healthz" % port, timeout=5)
    with s.conn() as c:
        assert c.call("PING") == "PONG"
    assert "HTTP on 127.0.0.2:%d" % port in s.stderr()
    # the same HTTP address and port in a second server: refused
    s2 = make_server(args=["--http-port", str(port), "--http-bind", "127.0.0.2"], start=False)
    s2.launch()
    assert s2.proc.wait(timeout=15) != 0, "an address and port another process holds"
    assert "cannot listen on 127.0.0.2:%d (HTTP): Address already in use" % port in s2.stderr()


def raw_error(s, data):
    with Conn(s.host, s.port, timeout=5) as c:
        c.send(data)
        got = c.wait_closed(5)
    return got


def test_before_auth_a_command_holds_no_more_than_a_login_needs(make_server):
    s = start(make_server, password="pw")
    many = b"*11\r\n" + b"$4\r\nPING\r\n" * 11
    assert raw_error(s, many) == b"-ERR Protocol error: unauthenticated multibulk length\r\n"
    big = b"*2\r\n$4\r\nECHO\r\n$20000\r\n"
    assert raw_error(s, big) == b"-ERR Protocol error: unauthenticated bulk length\r\n"
    # once authenticated, the full caps, also in the same write as the AUTH
    with socket.create_connection((s.host, s.port), timeout=5) as sock:
        payload = b"x" * 20000
        sock.sendall(b"*2\r\n$4\r\nAUTH\r\n$2\r\npw\r\n*2\r\n$4\r\nECHO\r\n$20000\r\n" + payload +
                     b"\r\n")
        want = b"+OK\r\n$20000\r\n" + payload + b"\r\n"
        got = b""
        while len(got) < len(want):
            chunk = sock.recv(65536)
            assert chunk, got[:100]
            got += chunk
        assert got == want
    # HELLO 3 AUTH fits the caps
    with s.conn() as c:
        assert as_map(c.call("HELLO", "3", "AUTH", "default", "pw"))["proto"] == 3
