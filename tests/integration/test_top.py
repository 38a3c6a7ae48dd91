"""The top keys (docs/observability.md): SL.TOP over RESP2 and RESP3 and GET /v1/top over
HTTP against a real sluiced. A known trace of takes (small enough for the summaries to be
exact) through every face that decides (SL.POLICY, CL.THROTTLE, SL.TAKE, /v1/check,
forward-auth, a shadow policy) is checked row by row against counts made here from the
answers; then the credential, bad parameters, the switch that turns them off, keys past the
byte cap, the window, and a flood of random keys that leaves their memory as it was."""

import os
import random
import sys
import time

import pytest
import requests

from conftest import free_port, write
from respclient import Error, as_map, pipeline

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from redis_server import RedisServer  # noqa: E402

CONFIG = """\
policies:
  api:
    limit: 3
    period: 1h
  login:
    limit: 1
    period: 1h
  dry:
    limit: 1
    period: 1h
    shadow: true
"""

PASSWORD = "t0p"
AUTH = {"Authorization": "Bearer " + PASSWORD}


def start(make_server, tmp_path, *args, password=PASSWORD, exact=True):
    """A sluiced with CONFIG and HTTP; exact: every decision counted, whatever the rate
    (--top-exact-rate 0), so that the counts checked here are exact on any machine."""
    cfg = tmp_path / "sluice.yaml"
    write(cfg, CONFIG)
    http = free_port()
    args = list(args) + (["--top-exact-rate", "0"] if exact else [])
    s = make_server(args=["--config", str(cfg), "--http-port", str(http)] + args,
                    password=password)
    s.url = "http://127.0.0.1:%d" % http
    return s


def top_http(s, **params):
    r = requests.get(s.url + "/v1/top", params=params, headers=AUTH, timeout=10)
    assert r.status_code == 200, r.text
    return r.json()


def rows_of(reply):
    """SL.TOP's rows as dicts (RESP2 flat arrays or RESP3 maps), keys and names as str."""
    out = []
    for row in reply:
        m = as_map(row)
        out.append({k: v.decode() if isinstance(v, bytes) else v for k, v in m.items()})
    return out


def expected(counts, kind, policy=None, count=10):
    """The rows the exact counts call for: count descending, then policy, then key."""
    rows = [(n, p, k) for (p, k, kd), n in counts.items()
            if kd == kind and n > 0 and (policy is None or p == policy)]
    rows.sort(key=lambda r: (-r[0], r[1], r[2].encode()))
    return [(p, k, n) for n, p, k in rows[:count]]


def run_trace(s):
    """Takes through every face; returns the exact counts {(policy, key, kind): n} made from
    the answers, and what each policy key has left."""
    counts = {}

    def note(policy, key, allowed):
        kind = "admitted" if allowed else "refused"
        counts[(policy, key, kind)] = counts.get((policy, key, kind), 0) + 1

    with s.conn() as c:
        for key, n in (("user:7", 6), ("user:8", 4), ("user:9", 1)):
            for _ in range(n):
                m = as_map(c.call("SL.POLICY", "api", key))
                note("api", key, m["allowed"] == 1)
        for _ in range(3):
            r = c.call("CL.THROTTLE", "a:1", 0, 1, 60)  # one a minute
            note("", "a:1", r[0] == 0)
        for _ in range(2):
            m = as_map(c.call("SL.TAKE", "a:2", 1, 60))
            note("", "a:2", m["allowed"] == 1)
        for _ in range(3):  # a shadow policy: allowed, but 2 would-be refusals
            m = as_map(c.call("SL.POLICY", "dry", "d:1"))
            assert m["allowed"] == 1
            note("dry", "d:1", m.get("would_allow", 1) == 1)
        m = as_map(c.call("SL.POLICY", "login", "alice"))
        note("login", "alice", m["allowed"] == 1)
        # Not decisions: a peek and a usage count nothing.
        c.call("SL.PEEK", "a:1", 1, 60)
        c.call("SL.USAGE", "user:7", "POLICY", "api")
    for _ in range(3):
        r = requests.get(s.url + "/v1/check", params={"key": "h:1", "limit": 1, "period": 60},
                         headers=AUTH, timeout=10)
        note("", "h:1", r.status_code == 200)
    for _ in range(5):
        r = requests.get(s.url + "/v1/auth/api", headers=dict(AUTH, **{"X-Api-Key": "user:10"}),
                         timeout=10)
        note("api", "user:10", r.status_code == 200)
    # The trace is what the limits say it is.
    assert counts[("api", "user:7", "refused")] == 3
    assert counts[("", "a:1", "refused")] == 2
    assert counts[("dry", "d:1", "refused")] == 2
    assert counts[("api", "user:10", "refused")] == 2
    assert counts[("", "h:1", "refused")] == 2
    left = {("api", "user:7"): 0, ("api", "user:8"): 0, ("api", "user:9"): 2,
            ("api", "user:10"): 0, ("dry", "d:1"): 0, ("login", "alice"): 0}
    return counts, left


def reply_of(c, *args):
    """The reply, errors returned rather than raised."""
    c.send_command(*args)
    return c.read_reply()


def check_rows(rows, want, left):
    got = [(r["policy"], r["key"], r["count"]) for r in rows]
    assert got == want, "got %r\nwant %r" % (got, want)
    for r in rows:
        assert r["error"] == 0, r  # fewer keys than counters: exact
        if r["policy"] == "":
            assert r["remaining"] is None, r  # an ad-hoc limit is the request's
        else:
            assert r["remaining"] == left[(r["policy"], r["key"])], r


def test_known_trace_exactly_over_resp2_resp3_and_http(make_server, tmp_path):
    s = start(make_server, tmp_path)
    counts, left = run_trace(s)
    with s.conn() as c:
        for kind in ("refused", "admitted"):
            for policy in (None, "api", "", "dry"):
                args = ["SL.TOP"] + (["POLICY", policy] if policy is not None else [])
                args += ["COUNT", 20, kind.upper()]
                want = expected(counts, kind, policy, 20)
                check_rows(rows_of(c.call(*args)), want, left)
                doc = top_http(s, **dict({"kind": kind, "count": 20},
                                         **({"policy": policy} if policy is not None else {})))
                assert doc["kind"] == kind and doc["policy"] == policy
                assert doc["window_s"] == 60 and doc["k"] == 128
                assert set(doc) == {"kind", "policy", "window_s", "k", "keys"}
                for row in doc["keys"]:
                    assert set(row) == {"policy", "key", "count", "error", "remaining"}, row
                check_rows(doc["keys"], want, left)
        # RESP3: the rows are maps.
        assert isinstance(c.call("HELLO", "3"), dict)
        reply = c.call("SL.TOP", "POLICY", "api")
        assert all(isinstance(r, dict) for r in reply)
        check_rows(rows_of(reply), expected(counts, "refused", "api"), left)
        # The defaults: refused, ten rows at most, across policies.
        assert rows_of(c.call("SL.TOP")) == rows_of(c.call("SL.TOP", "COUNT", 10, "REFUSED"))
    assert top_http(s) == top_http(s, kind="refused", count=10)
    two = top_http(s, count=2)["keys"]
    assert [(r["policy"], r["key"]) for r in two] == [(p, k) for p, k, _ in
                                                      expected(counts, "refused", None, 2)]


def test_settings_from_the_config_file(make_server, tmp_path):
    # the server section names them as the flags do; a flag wins over the file
    cfg = tmp_path / "sluice.yaml"
    write(cfg, "server:\n  top_keys: 20\n  top_window: 5\n" + CONFIG)
    http = free_port()
    s = make_server(args=["--config", str(cfg), "--http-port", str(http)])
    doc = requests.get("http://127.0.0.1:%d/v1/top" % http, timeout=10).json()
    assert (doc["k"], doc["window_s"]) == (20, 5)
    http2 = free_port()
    s2 = make_server(args=["--config", str(cfg), "--http-port", str(http2), "--top-keys", "7"])
    doc = requests.get("http://127.0.0.1:%d/v1/top" % http2, timeout=10).json()
    assert (doc["k"], doc["window_s"]) == (7, 5)
    with s.conn() as c:
        e = reply_of(c, "SL.TOP", "COUNT", 21)
        assert isinstance(e, Error) and "between 1 and 20" in str(e)


def test_with_a_central_redis_store(make_server, tmp_path):
    """Decisions that complete later (a round trip to Redis) are counted as well, their keys
    copied with them; remaining is null, since only a round trip could tell it."""
    redis_store = RedisServer(str(tmp_path / "redis")).start()
    try:
        s = start(make_server, tmp_path, "--store", "redis://127.0.0.1:%d" % redis_store.port)
        with s.conn() as c:
            allowed = [as_map(r)["allowed"] for r in
                       pipeline(c, [("SL.POLICY", "api", "user:%d" % (i % 2)) for i in range(10)])]
            assert allowed.count(0) == 4  # 5 each, limit 3
            rows = rows_of(c.call("SL.TOP", "POLICY", "api"))
        assert [(r["key"], r["count"], r["remaining"]) for r in rows] == \
            [("user:0", 2, None), ("user:1", 2, None)]
        s.stop()
    finally:
        redis_store.stop()


def test_credential_is_the_other_commands(make_server, tmp_path):
    s = start(make_server, tmp_path)
    with s.conn(auth=False) as c:
        e = reply_of(c, "SL.TOP")
        assert isinstance(e, Error) and e.code == "NOAUTH", e
    r = requests.get(s.url + "/v1/top", timeout=10)
    assert r.status_code == 401 and r.json()["field"] == "authorization", r.text
    r = requests.get(s.url + "/v1/top", headers={"Authorization": "Bearer wrong"}, timeout=10)
    assert r.status_code == 401
    assert requests.get(s.url + "/v1/top", headers=AUTH, timeout=10).status_code == 200


def test_bad_parameters_name_what_was_wrong(make_server, tmp_path):
    s = start(make_server, tmp_path, "--top-keys", "50")
    with s.conn() as c:
        for args, words in (
                (["COUNT", 0], "COUNT must be between 1 and 50 (--top-keys)"),
                (["COUNT", 51], "COUNT must be between 1 and 50 (--top-keys)"),
                (["COUNT", "abc"], "value is not an integer or out of range"),
                (["POLICY", "nope"], "unknown policy 'nope'"),
                (["POLICY"], "POLICY needs a value"),
                (["POLICY", "api", "POLICY", "api"], "option 'POLICY' is given twice"),
                (["COUNT", 1, "COUNT", 2], "option 'COUNT' is given twice"),
                (["REFUSED", "ADMITTED"], "REFUSED or ADMITTED, once"),
                (["SOMETIMES"], "unknown option 'SOMETIMES'")):
            e = reply_of(c, "SL.TOP", *args)
            assert isinstance(e, Error), (args, e)
            assert str(e).startswith("ERR ") and words in str(e), (args, str(e))
        assert c.call("PING") == "PONG"
    for params, field, words in (
            ({"count": 0}, "count", "count must be an integer from 1 to 50 (--top-keys)"),
            ({"count": 51}, "count", "from 1 to 50"),
            ({"count": "x"}, "count", "from 1 to 50"),
            ({"kind": "blocked"}, "kind", "kind must be refused or admitted"),
            ({"policy": "nope"}, "policy", "unknown policy 'nope'"),
            ({"policy": "p" * 65}, "policy", "at most 64 bytes"),
            ({"limit": 5}, "limit", "unknown parameter 'limit'")):
        r = requests.get(s.url + "/v1/top", params=params, headers=AUTH, timeout=10)
        assert r.status_code == 400, (params, r.text)
        assert r.json()["field"] == field and words in r.json()["error"], (params, r.text)
    r = requests.get(s.url + "/v1/top?count=1&count=2", headers=AUTH, timeout=10)
    assert r.status_code == 400 and r.json() == {"error": "count is given twice", "field": "count"}
    r = requests.post(s.url + "/v1/top", headers=AUTH, timeout=10)
    assert r.status_code == 405 and r.headers["Allow"] == "GET, HEAD"
    r = requests.head(s.url + "/v1/top", headers=AUTH, timeout=10)
    assert r.status_code == 200 and r.text == ""


def test_top_keys_off(make_server, tmp_path):
    s = start(make_server, tmp_path, "--top-keys", "0")
    with s.conn() as c:
        c.call("SL.POLICY", "api", "user:1")
        e = reply_of(c, "SL.TOP")
        assert isinstance(e, Error) and "top keys are off" in str(e) and "--top-keys" in str(e)
    r = requests.get(s.url + "/v1/top", headers=AUTH, timeout=10)
    assert r.status_code == 404 and "--top-keys" in r.json()["error"], r.text
    metrics = requests.get(s.url + "/metrics", headers=AUTH, timeout=10).text
    assert "sluice_top_keys_bytes" not in metrics


def test_keys_past_the_byte_cap_and_not_utf8(make_server, tmp_path):
    s = start(make_server, tmp_path)
    long_key = b"tenant-42/" + b"x" * 90  # 100 bytes: the first 64 are kept
    odd = b"\xff\xfeok\x00\"\\"
    with s.conn() as c:
        for _ in range(5):
            c.call("SL.POLICY", "api", long_key)
        for _ in range(2):
            c.call("SL.TAKE", odd, 1, 60)
        rows = [as_map(r) for r in c.call("SL.TOP", "COUNT", 5)]
    assert rows[0]["key"] == long_key[:64] and rows[0]["count"] == 2
    assert rows[0]["truncated"] == 1 and rows[0]["remaining"] is None, rows[0]
    assert rows[1]["key"] == odd and "truncated" not in rows[1], rows[1]  # RESP: the bytes
    doc = top_http(s, count=5)
    first, second = doc["keys"]
    assert first["key"] == long_key[:64].decode() and first["truncated"] is True
    assert second["key"] == "\ufffd\ufffdok\x00\"\\"  # each byte that is not UTF-8: U+FFFD


def test_window_forgets(make_server, tmp_path):
    s = start(make_server, tmp_path, "--top-window", "1")
    with s.conn() as c:
        for _ in range(4):
            c.call("SL.POLICY", "login", "bob")
        assert [as_map(r)["count"] for r in c.call("SL.TOP")] == [3]
    assert top_http(s)["window_s"] == 1
    time.sleep(2.2)  # two windows later: nothing of then is counted
    with s.conn() as c:
        assert c.call("SL.TOP") == []
        assert c.call("SL.TOP", "ADMITTED") == []


def metric(s, name):
    text = requests.get(s.url + "/metrics", headers=AUTH, timeout=10).text
    for line in text.splitlines():
        if line.startswith(name + " "):
            return int(float(line.split()[1]))
    raise AssertionError("no %s in /metrics" % name)


def test_sampling_above_the_exact_rate(make_server, tmp_path):
    """Above --top-exact-rate decisions a second on a thread, 1 in S is counted with weight
    S: the rows say S, and a heavy key's count is within a few standard deviations
    (sqrt(true * (S - 1))) of the truth. The load lasts for many spans of 8 192 decisions,
    after each of which the worker chooses S from their rate."""
    s = start(make_server, tmp_path, "--top-exact-rate", "2000", "--threads", "1", exact=False)
    rng = random.Random(7)
    refused = 0
    with s.conn(timeout=60) as c:
        t0 = time.monotonic()
        while time.monotonic() - t0 < 3.5:
            cmds = []
            for _ in range(2000):
                if rng.random() < 0.3:
                    cmds.append(("CL.THROTTLE", "heavy", 0, 1, 3600))
                else:
                    cmds.append(("CL.THROTTLE", "k:%d" % rng.getrandbits(40), 0, 1, 3600))
            for cmd, r in zip(cmds, pipeline(c, cmds)):
                if cmd[1] == "heavy" and r[0] == 1:
                    refused += 1
        rows = [as_map(r) for r in c.call("SL.TOP", "POLICY", "", "COUNT", 3)]
    assert rows[0]["key"] == b"heavy", rows
    S = rows[0]["sample"]
    assert S >= 2 and S & (S - 1) == 0, rows[0]  # a power of two
    sigma = (refused * (S - 1)) ** 0.5
    lo, hi = rows[0]["count"] - rows[0]["error"] - 5 * sigma, rows[0]["count"] + 5 * sigma
    assert lo <= refused <= hi, (refused, rows[0], sigma)
    print("sampling: 1 in %d counted; heavy refused %d times, counted %d (error %d)"
          % (S, refused, rows[0]["count"], rows[0]["error"]))
    doc = top_http(s, policy="", count=1)
    assert doc["keys"][0]["key"] == "heavy" and doc["keys"][0]["sample"] >= 2


def test_flood_of_random_keys_leaves_memory_bounded(make_server, tmp_path):
    """200 000 takes of keys never seen before (long ones), with one key refused among them
    as 5% of the takes: the summaries' memory (the server's own gauge) is what it was after
    the first takes on each thread, the refused key is at the top, and every row's count is
    within its error of the truth (each flood key admitted once)."""
    k = 16
    s = start(make_server, tmp_path, "--top-keys", str(k))
    rng = random.Random(2024)
    conns = [s.conn(timeout=60) for _ in range(4)]
    try:
        for c in conns:  # every connection's worker makes its ad-hoc tables
            c.call("CL.THROTTLE", "warm", 0, 1, 3600)
        before = metric(s, "sluice_top_keys_bytes")
        assert before > 0
        heavy = 0
        for rnd in range(10):
            for c in conns:
                cmds = []
                for _ in range(5000):
                    if rng.random() < 0.05:
                        cmds.append(("CL.THROTTLE", "heavy", 0, 1, 3600))
                        heavy += 1
                    else:
                        key = "flood:%032x:" % rng.getrandbits(128) + "y" * 100
                        cmds.append(("CL.THROTTLE", key, 0, 1, 3600))
                replies = pipeline(c, cmds)
                assert all(isinstance(r, list) for r in replies)
        after = metric(s, "sluice_top_keys_bytes")
        assert after == before, "the summaries grew: %d -> %d bytes" % (before, after)
        with conns[0] as c:
            refused = [as_map(r) for r in c.call("SL.TOP", "COUNT", k)]
            admitted = [as_map(r) for r in c.call("SL.TOP", "ADMITTED", "COUNT", k)]
    finally:
        for c in conns:
            c.close()
    # "heavy" was admitted once and refused heavy - 1 times; "warm" refused never.
    assert refused[0]["key"] == b"heavy"
    assert refused[0]["count"] - refused[0]["error"] <= heavy - 1 <= refused[0]["count"]
    n_admitted = 200000 - heavy + 1 + 1  # every flood key once, heavy once, warm once
    for r in admitted:
        true = 1  # each key here was admitted once
        assert r["count"] - r["error"] <= true <= r["count"], r
        # per thread k counters over two generations: the merged floor is at most N/k
        assert r["error"] <= n_admitted // k, r
    assert any(r["error"] > 0 for r in admitted), "the flood should have evicted keys"
    s.assert_serving()
