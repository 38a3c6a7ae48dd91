"""envoyproxy/ratelimit's HTTP face on sluiced: POST /json (ShouldRateLimit in proto3 JSON,
answered 200 or 429) and GET /healthcheck, with Python's requests, on the embedded store and
on a central redis-server (module and script), where the store answers later and the answer
keeps its place among a connection's pipelined requests."""

import os
import re
import socket
import sys

import pytest
import requests

from conftest import Sluiced, free_port, write

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from redis_server import RedisServer  # noqa: E402

EDGE = """\
domain: edge
descriptors:
  - key: remote_address
    rate_limit: {unit: hour, requests_per_unit: 3, name: per_ip}
"""


def body(value, hits=None):
    d = {"entries": [{"key": "remote_address", "value": value}]}
    if hits is not None:
        d["hitsAddend"] = str(hits)
    return {"domain": "edge", "descriptors": [d]}


def start(tmp_path, extra=()):
    d = tmp_path / "envoy"
    d.mkdir(exist_ok=True)
    write(d / "edge.yaml", EDGE)
    http = free_port()
    s = Sluiced(args=["--http-port", str(http), "--envoy-config", str(d)] + list(extra),
                workdir=str(tmp_path))
    s.http = "http://127.0.0.1:%d" % http
    return s.start()


@pytest.fixture(params=["memory", "redis-module", "redis-script"])
def server(request, tmp_path):
    redis = None
    extra = []
    if request.param != "memory":
        redis = RedisServer(str(tmp_path / "redis"),
                            module=(request.param == "redis-module")).start()
        extra = ["--store", "redis://127.0.0.1:%d" % redis.port, "--store-timeout-ms", "2000"]
    s = start(tmp_path, extra)
    yield s
    s.stop()
    if redis:
        redis.stop()


def test_json_counts_down_then_answers_429(server):
    for remaining in (2, 1, 0):
        r = requests.post(server.http + "/json", json=body("10.0.0.1"), timeout=10)
        assert r.status_code == 200, r.text
        j = r.json()
        assert j["overallCode"] == "OK"
        st = j["statuses"][0]
        assert st["currentLimit"] == {"name": "per_ip", "requestsPerUnit": 3, "unit": "HOUR"}
        # proto3 JSON leaves a 0 out
        assert st.get("limitRemaining", 0) == remaining
        assert st["durationUntilReset"].endswith("s")
    r = requests.post(server.http + "/json", json=body("10.0.0.1"), timeout=10)
    assert r.status_code == 429
    assert r.json()["overallCode"] == "OVER_LIMIT"
    assert r.json()["statuses"][0]["code"] == "OVER_LIMIT"
    # hits_addend 0 asks without counting; another address has its own count
    r = requests.post(server.http + "/json", json=body("10.0.0.2", hits=0), timeout=10)
    assert r.json()["statuses"][0]["limitRemaining"] == 3


def test_pipelined_json_requests_are_answered_in_order(server):
    # Six requests on one connection at once: with Redis each answer comes later, and
    # the answers must still come back in the order of the requests.
    host, port = server.http[len("http://"):].split(":")
    payloads = []
    for i in range(6):
        b = ('{"domain":"edge","descriptors":[{"entries":[{"key":"remote_address",'
             '"value":"p%d"}]}],"hitsAddend":%d}' % (i % 2, 1 + i // 2))
        payloads.append("POST /json HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                        "Content-Length: %d\r\n\r\n%s" % (len(b), b))
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall("".join(payloads).encode())
        got = b""
        while got.count(b"HTTP/1.1 ") < 6 or not got.endswith(b"}"):
            chunk = s.recv(65536)
            assert chunk, got
            got += chunk
    statuses = [int(m) for m in re.findall(rb"HTTP/1\.1 (\d{3}) ", got)]
    # p0 takes 1, 2, 3 (the third over: 1 + 2 + 3 > 3); p1 likewise
    assert statuses == [200, 200, 200, 200, 429, 429], got


def test_bad_json_is_400_naming_the_field(tmp_path):
    s = start(tmp_path)
    try:
        r = requests.post(s.http + "/json", data='{"domain":"edge","descriptors":[{"entries":'
                          '[{"key":"k","valu":"v"}]}]}', timeout=10)
        assert r.status_code == 400
        assert "valu" in r.json()["error"]
        r = requests.post(s.http + "/json", json={"domain": "edge", "descriptors": []},
                          timeout=10)
        assert r.status_code == 400
        assert r.json()["error"] == "rate limit descriptor list must not be empty"
        r = requests.post(s.http + "/json", data="{", timeout=10)
        assert r.status_code == 400
        assert requests.get(s.http + "/json", timeout=10).status_code == 405
        assert s.alive()
    finally:
        s.stop()


def test_healthcheck_and_json_without_a_configuration(make_server):
    http = free_port()
    s = make_server(args=["--http-port", str(http)])
    url = "http://127.0.0.1:%d" % http
    r = requests.get(url + "/healthcheck", timeout=10)
    assert r.status_code == 503 and "--envoy-config" in r.text
    r = requests.post(url + "/json", json=body("1"), timeout=10)
    assert r.status_code == 503 and "--envoy-config" in r.json()["error"]
    assert s.alive()


def test_healthcheck_is_open_and_json_takes_the_token(tmp_path):
    s = start(tmp_path, ["--http-token", "sekrit"])
    try:
        r = requests.get(s.http + "/healthcheck", timeout=10)
        assert r.status_code == 200 and r.text == "OK\n"
        assert requests.post(s.http + "/json", json=body("1"), timeout=10).status_code == 401
        r = requests.post(s.http + "/json", json=body("1"), timeout=10,
                          headers={"Authorization": "Bearer sekrit"})
        assert r.status_code == 200
    finally:
        s.stop()


def test_metrics_count_hits_per_stats_key(tmp_path):
    s = start(tmp_path)
    try:
        # limit 3: 1 within; 2 within, leaving it 3/3 used (past 80%); 1 and 5 over
        for hits in (1, 2, 1, 5):
            requests.post(s.http + "/json", json=body("10.0.0.7", hits=hits), timeout=10)
        text = requests.get(s.http + "/metrics", timeout=10).text
        got = {}
        for line in text.splitlines():
            m = re.match(r'sluice_envoy_(\w+)_total\{key="edge\.remote_address"\} (\d+)$', line)
            if m:
                got[m.group(1)] = int(m.group(2))
        assert got == {"hits": 9, "over_limit": 6, "near_limit": 2, "within_limit": 3,
                       "shadow_mode": 0}, got
    finally:
        s.stop()


def test_metrics_keep_at_most_4096_keys_the_rest_under_other(tmp_path):
    """detailed_metric puts each request's values in its stats key, so a client could
    grow the table without bound: one worker keeps 4095 keys and "_other" (4096 in
    all), and the hits of every later key count under _other."""
    d = tmp_path / "envoy"
    d.mkdir()
    write(d / "edge.yaml", EDGE.replace("name: per_ip}", "name: per_ip}\n    detailed_metric: true"))
    http = free_port()
    s = Sluiced(args=["--threads", "1", "--http-port", str(http), "--envoy-config", str(d)],
                workdir=str(tmp_path)).start()
    s.http = "http://127.0.0.1:%d" % http
    try:
        n = 4200
        with socket.create_connection(("127.0.0.1", http), timeout=30) as c:
            f = c.makefile("rb")
            for start in range(0, n, 200):
                batch = b""
                for i in range(start, min(n, start + 200)):
                    js = ('{"domain":"edge","descriptors":[{"entries":[{"key":"remote_address",'
                          '"value":"10.0.%d.%d"}]}]}' % (i // 256, i % 256)).encode()
                    batch += (b"POST /json HTTP/1.1\r\nHost: x\r\nContent-Type: application/json"
                              b"\r\nContent-Length: %d\r\n\r\n%s" % (len(js), js))
                c.sendall(batch)
                for _ in range(start, min(n, start + 200)):
                    status = f.readline()
                    assert status.startswith(b"HTTP/1.1 200"), status
                    length = 0
                    while True:
                        line = f.readline()
                        if line in (b"\r\n", b""):
                            break
                        if line.lower().startswith(b"content-length:"):
                            length = int(line.split(b":")[1])
                    f.read(length)
        text = requests.get(s.http + "/metrics", timeout=10).text
        keys, other = set(), None
        for line in text.splitlines():
            m = re.match(r'sluice_envoy_hits_total\{key="([^"]*)"\} (\d+)$', line)
            if not m:
                continue
            if m.group(1) == "_other":
                other = int(m.group(2))
            else:
                assert m.group(1).startswith("edge.remote_address_10.0."), m.group(1)
                assert int(m.group(2)) == 1, line
                keys.add(m.group(1))
        assert len(keys) == 4095
        assert other == n - 4095
    finally:
        s.stop()
