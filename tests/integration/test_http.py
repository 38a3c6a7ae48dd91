"""sluiced over HTTP, with real clients (Python requests, curl) on 127.0.0.1: every
endpoint, every rate limit header's exact syntax, 429 after the limit, Retry-After
rounding, forward-auth, metrics, and bad input of each kind (the server keeps serving)."""

import json
import re
import shutil
import socket
import subprocess
import time

import pytest
import requests

from conftest import Sluiced, free_port

CONFIG = """
policies:
  api:
    limit: 3
    period: 1h
    tiers:
      paid: {limit: 5, period: 1h}
  shared:
    limit: 100
    period: 1h
    global: {limit: 2, period: 1h}
  dry:
    limit: 1
    period: 1h
    shadow: true
  dryglobal:
    limit: 100
    period: 1h
    global: {limit: 1, period: 1h}
    shadow: true
  wide:
    limit: 100
    period: 1h
    global: {limit: 50, period: 1h}
  slowglobal:
    limit: 1
    period: 10m
    global: {limit: 2, period: 1h}
"""

# Every field a client library reads to pace itself.
RATE_FIELDS = ("X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset", "Retry-After",
               "RateLimit", "RateLimit-Policy")


@pytest.fixture(scope="module")
def http(tmp_path_factory):
    conf = tmp_path_factory.mktemp("http") / "sluice.yaml"
    conf.write_text(CONFIG)
    port = free_port()
    s = Sluiced(args=["--http-port", str(port), "--config", str(conf)]).start()
    s.http_port = port
    s.base = "http://127.0.0.1:%d" % port
    yield s
    s.stop()
    shutil.rmtree(s.workdir, ignore_errors=True)


@pytest.fixture
def session():
    with requests.Session() as sess:
        yield sess


def uniq(request, tag=""):
    return "h:%s:%s:%d" % (request.node.name, tag, time.monotonic_ns())


def check(sess, base, **params):
    return sess.get(base + "/v1/check", params=params, timeout=5)


def test_healthz(http, session):
    r = session.get(http.base + "/healthz", timeout=5)
    assert r.status_code == 200
    assert r.json() == {"status": "ok"}


def test_allowed_then_429_with_every_header(http, session, request):
    key = uniq(request)
    for remaining in (1, 0):
        r = check(session, http.base, key=key, limit=2, period=60)
        assert r.status_code == 200
        body = r.json()
        assert body["allowed"] is True and body["limit"] == 2 and body["remaining"] == remaining
        assert body["retry_after_ms"] == 0
        assert r.headers["X-RateLimit-Limit"] == "2"
        assert r.headers["X-RateLimit-Remaining"] == str(remaining)
        assert "Retry-After" not in r.headers
        assert r.headers["Content-Type"].startswith("application/json")
    r = check(session, http.base, key=key, limit=2, period=60)
    assert r.status_code == 429
    body = r.json()
    assert body["allowed"] is False and body["remaining"] == 0
    # 2 per 60 s: one comes back 30 s after the first; Retry-After rounds up
    assert 29000 < body["retry_after_ms"] <= 30000
    assert r.headers["Retry-After"] == str(-(-body["retry_after_ms"] // 1000))
    assert r.headers["X-RateLimit-Remaining"] == "0"
    assert int(r.headers["X-RateLimit-Reset"]) == -(-body["reset_after_ms"] // 1000)
    # the IETF draft's structured fields
    assert re.fullmatch(r'"[^"]*";q=2;w=60', r.headers["RateLimit-Policy"]), r.headers
    m = re.fullmatch(r'"[^"]*";r=0;t=(\d+)', r.headers["RateLimit"])
    assert m and int(m.group(1)) == int(r.headers["X-RateLimit-Reset"])


def test_head_answers_like_get_and_consumes_nothing(http, session, request):
    key = uniq(request)
    url = http.base + "/v1/check"
    params = dict(key=key, limit=1, period=3600)
    for _ in range(3):
        r = session.head(url, params=params, timeout=5)
        assert r.status_code == 200 and r.headers["X-RateLimit-Remaining"] == "0"
        assert r.content == b""
    assert session.get(url, params=params, timeout=5).status_code == 200
    r = session.head(url, params=params, timeout=5)
    assert r.status_code == 429 and "Retry-After" in r.headers


def test_retry_after_is_whole_seconds_rounded_up(http, session, request):
    key = uniq(request)
    assert check(session, http.base, key=key, limit=1, period="1500ms").status_code == 200
    r = check(session, http.base, key=key, limit=1, period="1500ms")
    assert r.status_code == 429
    assert 1000 < r.json()["retry_after_ms"] <= 1500
    assert r.headers["Retry-After"] == "2"


def test_every_algorithm_and_cost(http, session, request):
    for algo in ("gcra", "token_bucket", "leaky_bucket", "fixed_window", "sliding_log",
                 "sliding_window"):
        key = uniq(request, algo)
        r = check(session, http.base, key=key, limit=4, period=3600, cost=3, algorithm=algo)
        assert r.status_code == 200, (algo, r.text)
        assert r.json()["remaining"] == 1, algo
        r = check(session, http.base, key=key, limit=4, period=3600, cost=3, algorithm=algo)
        assert r.status_code == 429, algo
    r = check(session, http.base, key=uniq(request, "huge"), limit=4, period=60, cost=5)
    assert r.status_code == 429
    assert r.json()["retry_after_ms"] == -1, "a cost above the burst never passes"
    assert "Retry-After" not in r.headers


def test_post_json_and_multi_limit_all_or_nothing(http, session, request):
    user, tenant = uniq(request, "u"), uniq(request, "t")
    r = session.post(http.base + "/v1/check", timeout=5,
                     json={"key": user, "limit": 10, "period": "1h", "cost": 2})
    assert r.status_code == 200 and r.json()["remaining"] == 8
    both = {"limits": [{"key": user, "limit": 10, "period": 3600},
                       {"key": tenant, "limit": 1, "period": 3600}]}
    assert session.post(http.base + "/v1/check", json=both, timeout=5).status_code == 200
    r = session.post(http.base + "/v1/check", json=both, timeout=5)
    assert r.status_code == 429
    assert r.json()["rejected_by"] == 1
    # the refused request consumed nothing from the user's limit
    r = session.post(http.base + "/v1/check", timeout=5,
                     json={"key": user, "limit": 10, "period": "1h", "cost": 0})
    assert r.json()["remaining"] == 7


def test_policies_tiers_global_and_shadow(http, session, request):
    a = uniq(request, "a")
    codes = [check(session, http.base, key=a, policy="api").status_code for _ in range(4)]
    assert codes == [200, 200, 200, 429]
    r = check(session, http.base, key=uniq(request, "b"), policy="api", tier="paid")
    assert r.json()["limit"] == 5
    assert r.headers["RateLimit-Policy"].startswith('"api";q=5;w=3600')
    # the global limit of 2 is shared by every key of the policy
    replies = [check(session, http.base, key=uniq(request, "g%d" % i), policy="shared")
               for i in range(3)]
    assert [r.status_code for r in replies] == [200, 200, 429]
    # both limits are reported, the global one under its own name
    assert replies[0].headers["RateLimit-Policy"] == '"shared";q=100;w=3600, "shared.global";q=2;w=3600'
    assert '"shared.global";r=0;t=' in replies[2].headers["RateLimit"]
    d = uniq(request, "d")
    assert check(session, http.base, key=d, policy="dry").status_code == 200
    r = check(session, http.base, key=d, policy="dry")
    assert r.status_code == 200, "shadow mode never refuses"
    assert r.json()["shadow"] is True and r.json()["would_allow"] is False
    r = check(session, http.base, key=d, policy="nope")
    assert r.status_code == 400 and r.json()["field"] == "policy"


def test_forward_auth(http, session, request):
    key = uniq(request)
    hdr = {"X-Api-Key": key}
    codes = [session.get(http.base + "/v1/auth/api", headers=hdr, timeout=5).status_code
             for _ in range(4)]
    assert codes == [200, 200, 200, 429]
    r = session.get(http.base + "/v1/auth/api", timeout=5)
    assert r.status_code == 401 and r.json()["field"] == "X-Api-Key"
    r = session.get(http.base + "/v1/auth/api?tier=paid", headers={"X-Api-Key": key + "p"},
                    timeout=5)
    assert r.status_code == 200 and r.json()["limit"] == 5
    # the path names a policy, nothing more: no parameters slip in through it
    r = session.get(http.base + "/v1/auth/api%26tier=paid", headers=hdr, timeout=5)
    assert r.status_code == 400 and r.json()["field"] == "policy", r.text
    r = session.get(http.base + "/v1/auth/api?limit=1000", headers=hdr, timeout=5)
    assert r.status_code == 400, "a forward-auth request cannot choose its own limit" 


def test_forward_auth_deny_status_and_header_choice(make_server, tmp_path):
    conf = tmp_path / "one.yaml"
    conf.write_text("policies:\n  one: {limit: 1, period: 1h}\n")
    port = free_port()
    make_server(args=["--http-port", str(port), "--http-deny-status", "403",
                      "--http-auth-header", "X-Forwarded-For", "--config", str(conf)])
    base = "http://127.0.0.1:%d" % port
    first = {"X-Forwarded-For": "10.0.0.1, 192.0.2.7"}
    assert requests.get(base + "/v1/auth/one", headers=first, timeout=5).status_code == 200
    r = requests.get(base + "/v1/auth/one", headers={"X-Forwarded-For": "192.0.2.7"}, timeout=5)
    assert r.status_code == 403, "the client is the right-most untrusted address"
    assert r.headers["X-RateLimit-Remaining"] == "0" and "Retry-After" in r.headers
    r = requests.get(base + "/v1/auth/one", headers={"X-Forwarded-For": "192.0.2.8"}, timeout=5)
    assert r.status_code == 200


def test_metrics(http, session, request):
    check(session, http.base, key=uniq(request), policy="api")
    text = session.get(http.base + "/metrics", timeout=5).text
    assert '# TYPE sluice_decisions_total counter' in text
    m = re.search(r'^sluice_decisions_total\{policy="api",outcome="allowed"\} (\d+)$', text, re.M)
    assert m and int(m.group(1)) >= 1
    assert re.search(r'^sluice_request_duration_seconds_count\{proto="http"\} [1-9]\d*$', text, re.M)
    assert re.search(r'^sluice_keys \d+$', text, re.M)
    assert re.search(r'^sluice_connections [1-9]\d*$', text, re.M)


def test_curl_sees_the_headers(http, request):
    url = http.base + "/v1/check?key=%s&limit=1&period=10" % uniq(request)
    out = subprocess.run(["curl", "-s", "-i", "--max-time", "5", url, url],
                         capture_output=True, timeout=10).stdout.decode()
    first, second = out.split("\r\n\r\n", 1)[0], out.split("HTTP/1.1 ", 2)[2]
    assert first.startswith("HTTP/1.1 200 OK\r\n")
    assert "\r\nX-RateLimit-Limit: 1\r\n" in first
    assert second.startswith("429 Too Many Requests\r\n"), "curl reused the connection"
    assert "\r\nRetry-After: 10\r\n" in second


@pytest.mark.parametrize("query,field", [
    ("limit=1&period=10", "key"),
    ("key=k&period=10", "limit"),
    ("key=k&limit=abc&period=10", "limit"),
    ("key=k&limit=1&period=soon", "period"),
    ("key=k&limit=1&period=10&algorithm=magic", "algorithm"),
    ("key=k&limit=1&period=10&cost=-1", "cost"),
    ("key=k&limit=1&period=10&bogus=1", "bogus"),
])
def test_bad_checks_name_the_field(http, session, query, field):
    r = session.get(http.base + "/v1/check?" + query, timeout=5)
    assert r.status_code == 400, r.text
    assert r.json()["field"] == field, r.text


def test_bad_json_and_unknown_routes(http, session):
    r = session.post(http.base + "/v1/check", data=b"{not json", timeout=5,
                     headers={"Content-Type": "application/json"})
    assert r.status_code == 400 and "error" in r.json()
    assert session.get(http.base + "/nope", timeout=5).status_code == 404
    r = session.delete(http.base + "/v1/check", timeout=5)
    assert r.status_code == 405 and "GET" in r.headers["Allow"]
    assert session.get(http.base + "/healthz", timeout=5).status_code == 200


def raw_exchange(port, data, timeout=5):
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(data)
        chunks = []
        try:
            while True:
                b = s.recv(65536)
                if not b:
                    break
                chunks.append(b)
        except socket.timeout:
            pass
        return b"".join(chunks)


@pytest.mark.parametrize("data,status", [
    (b"GARBAGE\r\n\r\n", 400),
    (b"GET /healthz HTTP/2.0\r\nHost: x\r\n\r\n", 505),
    (b"GET /healthz HTTP/1.1\r\n\r\n", 400),  # no Host
    (b"GET /" + b"a" * 20000 + b" HTTP/1.1\r\nHost: x\r\n\r\n", 414),
    (b"GET /healthz HTTP/1.1\r\nHost: x\r\nX: " + b"v" * 20000 + b"\r\n\r\n", 431),
    (b"POST /v1/check HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999\r\n\r\n", 413),
    (b"POST /v1/check HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n", 501),
    (b"POST /v1/check HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", 400),
], ids=["garbage", "http2", "no-host", "long-uri", "big-header", "big-body", "chunked",
        "two-lengths"])
def test_malformed_requests_get_their_status_and_the_server_carries_on(http, data, status):
    reply = raw_exchange(http.http_port, data)
    assert reply.startswith(b"HTTP/1.1 %d " % status), reply[:200]
    body = reply.split(b"\r\n\r\n", 1)[1]
    assert "error" in json.loads(body)
    assert requests.get(http.base + "/healthz", timeout=5).status_code == 200


def test_pipelined_requests_answer_in_order(http, request):
    key = uniq(request)
    one = b"GET /v1/check?key=%s&limit=100&period=60 HTTP/1.1\r\nHost: x\r\n\r\n" % key.encode()
    last = b"GET /v1/check?key=%s&limit=100&period=60 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n" % key.encode()
    reply = raw_exchange(http.http_port, one * 9 + last)
    bodies = [json.loads(b) for b in re.findall(rb'\{[^}]*\}', reply)]
    assert [b["remaining"] for b in bodies] == list(range(99, 89, -1))


def test_a_body_that_arrives_late_is_waited_for(http, request):
    body = json.dumps({"key": uniq(request), "limit": 5, "period": 60}).encode()
    head = (b"POST /v1/check HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Connection: close\r\nContent-Length: %d\r\n\r\n" % len(body))
    with socket.create_connection(("127.0.0.1", http.http_port), timeout=5) as s:
        s.sendall(head + body[:5])
        time.sleep(0.2)
        s.sendall(body[5:])
        reply = b""
        while True:
            b = s.recv(65536)
            if not b:
                break
            reply += b
    assert reply.startswith(b"HTTP/1.1 200 OK\r\n"), reply[:200]
    assert json.loads(reply.split(b"\r\n\r\n", 1)[1])["remaining"] == 4


def assert_invisible_shadow(r, would_allow):
    assert r.status_code == 200, r.text
    present = [f for f in RATE_FIELDS if f in r.headers]
    assert present == [], "a dry run shows %s to the client" % present
    body = r.json()
    # every field a client acts on says go; the real answer is beside them
    assert (body["allowed"], body["retry_after_ms"], body["rejected_by"]) == (True, 0, -1), body
    assert body["shadow"] is True and body["would_allow"] is would_allow, body
    assert (body["would_retry_after_ms"] > 0) is not would_allow, body


def test_shadow_policy_is_invisible_to_clients(http, session, request):
    # dry: 1 per hour per key
    key, auth = uniq(request, "c"), {"X-Api-Key": uniq(request, "a")}
    for would_allow in (True, False, False):
        assert_invisible_shadow(check(session, http.base, key=key, policy="dry"), would_allow)
        assert_invisible_shadow(session.get(http.base + "/v1/auth/dry", headers=auth, timeout=5),
                                would_allow)
    # dryglobal: 1 per hour in all, each request from a new key
    assert_invisible_shadow(check(session, http.base, key=uniq(request, "g1"), policy="dryglobal"),
                            True)
    r = check(session, http.base, key=uniq(request, "g2"), policy="dryglobal")
    assert_invisible_shadow(r, False)
    assert r.json()["scope"] == "global", "the global limit would have refused"
    r = session.get(http.base + "/v1/auth/dryglobal", headers={"X-Api-Key": uniq(request, "g3")},
                    timeout=5)
    assert_invisible_shadow(r, False)
    # the would-be refusals are the operator's: in /metrics and in the log
    text = session.get(http.base + "/metrics", timeout=5).text
    m = re.search(r'^sluice_decisions_total\{policy="dry",outcome="shadow_rejected"\} (\d+)$', text,
                  re.M)
    assert m and int(m.group(1)) >= 4, text
    assert "WARN shadow policy 'dry' would have refused" in http.stderr()
    assert "WARN shadow policy 'dryglobal' would have refused" in http.stderr()


def test_policy_answers_name_the_binding_limit(http, session, request):
    # wide: 100 per key, 50 in all. The first key's take leaves 99 for the
    # key but 49 for everyone: the global limit binds.
    r = check(session, http.base, key=uniq(request, "a"), policy="wide")
    assert r.status_code == 200
    assert r.json()["scope"] == "global" and r.json()["rejected_by"] == -1, r.json()
    assert r.json()["remaining"] == 49
    assert (r.headers["X-RateLimit-Limit"], r.headers["X-RateLimit-Remaining"]) == ("50", "49")
    # a policy without a global limit: the key's
    r = check(session, http.base, key=uniq(request, "k"), policy="api")
    assert (r.json()["scope"], r.json()["rejected_by"], r.json()["remaining"]) == ("key", -1, 2)


def test_a_refusal_by_both_limits_shows_the_longer_wait(http, session, request):
    # slowglobal: 1 per 10 minutes per key, 2 per hour in all
    a, b = uniq(request, "a"), uniq(request, "b")
    assert check(session, http.base, key=a, policy="slowglobal").status_code == 200
    assert check(session, http.base, key=b, policy="slowglobal").status_code == 200
    # a's own limit refuses (back in 10 minutes), and so does the global one
    # (back in 30): the request passes only after the longer wait
    r = check(session, http.base, key=a, policy="slowglobal")
    assert r.status_code == 429
    body = r.json()
    assert body["rejected_by"] == 0, "the first limit that refused"
    assert body["scope"] == "global" and body["limit"] == 2, body
    assert 1700 < int(r.headers["Retry-After"]) <= 1800, r.headers
    assert '"slowglobal.global";r=0;' in r.headers["RateLimit"]
    # HEAD asks the same without consuming, and names the same limit
    r = session.head(http.base + "/v1/check", params=dict(key=a, policy="slowglobal"), timeout=5)
    assert r.status_code == 429 and 1700 < int(r.headers["Retry-After"]) <= 1800


def test_multi_limit_items_have_their_own_names(http, session, request):
    both = {"limits": [{"key": uniq(request, "u"), "limit": 10, "period": 3600},
                       {"key": uniq(request, "t"), "limit": 1, "period": 3600}]}
    r = session.post(http.base + "/v1/check", json=both, timeout=5)
    assert r.status_code == 200
    assert r.headers["RateLimit-Policy"] == '"limit0";q=10;w=3600, "limit1";q=1;w=3600'
    assert re.fullmatch(r'"limit0";r=9;t=\d+, "limit1";r=0;t=\d+', r.headers["RateLimit"]), r.headers


def test_envoy_ext_authz_path_and_any_method(http, session, request):
    # Envoy appends the client's path and query to the auth URL, and keeps its method
    key = uniq(request)
    hdr = {"X-Api-Key": key}
    url = http.base + "/v1/auth/api/orders/123?page=2"
    codes = [session.request(m, url, headers=hdr, timeout=5).status_code
             for m in ("DELETE", "PUT", "PATCH")]
    assert codes == [200, 200, 200], "policy api: 3 per hour, whatever the method and path"
    r = session.request("OPTIONS", url, headers=hdr, timeout=5)
    assert r.status_code == 429 and r.json()["remaining"] == 0
    # the query after the client's path is the client's: it cannot pick a tier or a cost
    r = session.delete(http.base + "/v1/auth/api/x?tier=paid&cost=0", headers=hdr, timeout=5)
    assert r.status_code == 429 and r.json()["limit"] == 3, r.text
    # a path that ends with the policy and a slash (the client asked for "/")
    r = session.post(http.base + "/v1/auth/api/", headers={"X-Api-Key": key + "2"}, data=b"x=1",
                     timeout=5)
    assert r.status_code == 200 and r.json()["remaining"] == 2
    # the key rules are the same: no header, 401
    r = session.delete(url, timeout=5)
    assert r.status_code == 401 and r.json()["field"] == "X-Api-Key"
    # the operator's own URL stays strict about its parameters
    r = session.get(http.base + "/v1/auth/api?page=2", headers=hdr, timeout=5)
    assert r.status_code == 400 and r.json()["field"] == "page"


def test_forward_auth_head_takes(http, session, request):
    # the method is the client's: a HEAD to the application is a request like any other
    hdr = {"X-Api-Key": uniq(request)}
    codes = [session.head(http.base + "/v1/auth/api", headers=hdr, timeout=5).status_code
             for _ in range(4)]
    assert codes == [200, 200, 200, 429]
    r = session.get(http.base + "/v1/auth/api", headers=hdr, timeout=5)
    assert r.status_code == 429
