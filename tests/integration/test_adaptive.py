"""Adaptive concurrency limits through sluiced: RESP's SL.ACQUIRE ... ADAPTIVE / POLICY,
SL.RELEASE with LATENCY and OUTCOME, SL.LIMIT; HTTP's /v1/acquire, /v1/release, /v1/limit;
policies from the config file and their reload; the sluice_adaptive_* metrics and
--max-adaptive-keys; and many clients on one key. Every assertion is on a value the rules in
docs/commands.md and include/sluice.h fix; the one wait is for a lease's TTL to pass."""

import json
import os
import re
import shutil
import signal
import threading
import time
import urllib.error
import urllib.request

import pytest
import redis

from conftest import Sluiced, free_port, write

CONFIG = """
policies:
  rate:
    limit: 10
    period: 1m
  back:
    algorithm: adaptive
    estimator: aimd
    max_limit: 10
    min_limit: 10
    initial_limit: 10
    ttl: 30s
  parts:
    algorithm: adaptive
    estimator: aimd
    max_limit: 10
    min_limit: 10
    initial_limit: 10
    partitions:
      live: 90%
      batch: 10%
"""

LEASE = re.compile(r"^[0-9a-f]{24}$")


@pytest.fixture(scope="module")
def srv(tmp_path_factory):
    """One sluiced with CONFIG and HTTP for the whole file."""
    d = tmp_path_factory.mktemp("adaptive")
    conf = d / "sluice.yaml"
    conf.write_text(CONFIG)
    port = free_port()
    s = Sluiced(args=["--http-port", str(port), "--config", str(conf)]).start()
    s.url = "http://127.0.0.1:%d" % port
    yield s
    s.stop()
    shutil.rmtree(s.workdir, ignore_errors=True)


@pytest.fixture
def c(srv):
    cl = srv.redis()
    yield cl
    cl.close()


def acq(cl, key, *args):
    return cl.execute_command("SL.ACQUIRE", key, *args)


def rel(cl, key, lease, *args):
    return cl.execute_command("SL.RELEASE", key, lease, *args)


def limit(cl, key, *args):
    """SL.LIMIT as a dict (RESP2 replies a flat array), or None."""
    v = cl.execute_command("SL.LIMIT", key, *args)
    if v is None:
        return None
    out = {}
    for i in range(0, len(v), 2):
        name = v[i].decode() if isinstance(v[i], bytes) else v[i]
        val = v[i + 1]
        out[name] = val.decode() if isinstance(val, bytes) else val
    return out


def err(cl, *args):
    with pytest.raises(redis.ResponseError) as e:
        cl.execute_command(*args)
    return str(e.value)


def http(url, method="GET", body=None, token=None, raw=None):
    """(status, headers, decoded JSON or None)."""
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    req = urllib.request.Request(url, data=data, method=method)
    if data is not None:
        req.add_header("Content-Type", "application/json")
    if token:
        req.add_header("Authorization", "Bearer " + token)
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            status, headers, text = r.status, r.headers, r.read()
    except urllib.error.HTTPError as e:
        status, headers, text = e.code, e.headers, e.read()
    try:
        return status, headers, json.loads(text)
    except ValueError:
        return status, headers, text.decode("utf-8", "replace")


# ---- RESP, ad hoc ----

def test_admitted_up_to_the_limit_then_null(c, key):
    leases = [acq(c, key, 3, 30000, "ADAPTIVE", "ESTIMATOR", "aimd", "MIN", 3, "INITIAL", 3)
              for _ in range(3)]
    for lease in leases:
        assert LEASE.match(lease.decode())
    assert len(set(leases)) == 3
    assert acq(c, key, 3, 30000, "ADAPTIVE", "ESTIMATOR", "aimd", "MIN", 3, "INITIAL", 3) is None
    st = limit(c, key)
    assert st["estimator"] == "aimd"
    assert (st["limit"], st["min_limit"], st["max_limit"]) == (3, 3, 3)
    assert st["in_flight"] == 3
    assert (st["admitted"], st["refused"], st["completed"], st["dropped"], st["expired"]) == \
        (3, 1, 0, 0, 0)
    assert st["in_flight_by_priority"] == [0, 3, 0]
    assert (st["refused_critical"], st["refused_default"], st["refused_sheddable"]) == (0, 1, 0)
    assert st["probing"] == 0
    # a release frees a slot; the same lease twice is 0
    assert rel(c, key, leases[0]) == 1
    assert rel(c, key, leases[0]) == 0
    again = acq(c, key, 3, 30000, "ADAPTIVE", "ESTIMATOR", "aimd", "MIN", 3, "INITIAL", 3)
    assert LEASE.match(again.decode())
    st = limit(c, key)
    assert (st["in_flight"], st["admitted"], st["refused"], st["completed"]) == (3, 4, 1, 1)
    for lease in leases[1:] + [again]:
        assert rel(c, key, lease, "LATENCY", "12.5") == 1
    assert limit(c, key)["in_flight"] == 0


def test_the_default_estimator_is_anchored(c, key):
    lease = acq(c, key, 50, 30000, "ADAPTIVE")
    assert lease is not None
    st = limit(c, key)
    assert st["estimator"] == "anchored"
    assert st["max_limit"] == 50
    assert rel(c, key, lease) == 1


def test_sl_limit_of_an_unknown_key_is_null(c, key):
    assert limit(c, key) is None
    assert limit(c, key, "POLICY", "back") is None


def test_dropped_cuts_the_aimd_limit(c, key):
    args = (20, 30000, "ADAPTIVE", "ESTIMATOR", "aimd", "MIN", 2, "INITIAL", 10)
    lease = acq(c, key, *args)
    assert limit(c, key)["limit"] == 10
    assert rel(c, key, lease, "OUTCOME", "dropped", "LATENCY", "5") == 1
    st = limit(c, key)
    assert st["limit"] < 10
    assert st["limit"] >= 2
    assert (st["dropped"], st["completed"], st["in_flight"]) == (1, 1, 0)


def test_ignored_outcome_leaves_the_limit(c, key):
    args = (20, 30000, "ADAPTIVE", "ESTIMATOR", "aimd", "MIN", 2, "INITIAL", 10)
    lease = acq(c, key, *args)
    assert rel(c, key, lease, "OUTCOME", "ignored") == 1
    st = limit(c, key)
    assert st["limit"] == 10
    assert st["dropped"] == 0


def test_an_expired_lease_frees_its_slot(c, key):
    args = (1, 150, "ADAPTIVE", "ESTIMATOR", "aimd", "MIN", 1, "INITIAL", 1)
    lease = acq(c, key, *args)
    assert lease is not None
    assert acq(c, key, *args) is None
    time.sleep(0.5)  # past the 150 ms TTL
    st = limit(c, key)
    assert st["expired"] == 1
    assert st["in_flight"] == 0
    assert rel(c, key, lease) == 0, "an expired lease is not held"
    second = acq(c, key, *args)
    assert second is not None and second != lease
    assert rel(c, key, second) == 1


@pytest.mark.parametrize("value", ["0", "-1", "abc", "1.", ".5", "1.1234567", "", "1e3",
                                   "99999999999999999999"])
def test_latency_parse_errors(c, key, value):
    lease = acq(c, key, 5, 30000, "ADAPTIVE")
    msg = err(c, "SL.RELEASE", key, lease, "LATENCY", value)
    assert "LATENCY must be milliseconds" in msg
    assert rel(c, key, lease, "LATENCY", "0.000001") == 1, "the lease is still held after the error"


@pytest.mark.parametrize("args,needle", [
    ((0, 1000, "ADAPTIVE"), "max_in_flight must be between 1 and 65536"),
    ((65537, 1000, "ADAPTIVE"), "max_in_flight must be between 1 and 65536"),
    ((5, 0, "ADAPTIVE"), "ttl_ms must be a positive number"),
    ((5, 1000, "ADAPTIVE", "MIN", 6), "the min limit must be between 1 and max_in_flight (5)"),
    ((5, 1000, "ADAPTIVE", "INITIAL", 6), "the initial limit must be between 1 and max_in_flight"),
    ((5, 1000, "ADAPTIVE", "MIN", 4, "INITIAL", 2), "the initial limit 2 is below the min limit 4"),
    ((5, 1000, "ADAPTIVE", "MIN", 0), "MIN must be a positive integer"),
    ((5, 1000, "ADAPTIVE", "ESTIMATOR", "bogus"), "unknown estimator 'bogus'"),
    ((5, 1000, "ADAPTIVE", "PRIORITY", "urgent"), "PRIORITY must be critical, default or sheddable"),
    ((5, 1000, "ADAPTIVE", "PRIORITY", "3"), "PRIORITY must be critical, default or sheddable"),
    ((5, 1000, "ADAPTIVE", "MIN", 1, "MIN", 1), "option 'MIN' is given twice"),
    ((5, 1000, "ADAPTIVE", "PRIORITY", "critical", "PRIORITY", "default"),
     "option 'PRIORITY' is given twice"),
    ((5, 1000, "ADAPTIVE", "MIN"), "syntax error"),
    ((5, 1000, "ADAPTIVE", "BOGUS", 1), "syntax error"),
    ((5, 1000, "ADAPTIVE", "PARTITION", "live"), "syntax error"),
    (("POLICY", "back", "MIN", 1), "syntax error"),
    (("POLICY", "parts", "PARTITION", "live", "PARTITION", "live"), "given twice"),
])
def test_acquire_errors(c, key, args, needle):
    msg = err(c, "SL.ACQUIRE", key, *args)
    assert needle in msg, msg
    assert limit(c, key) is None, "an error makes no limiter"


def test_release_errors(c, key):
    lease = acq(c, key, 5, 30000, "ADAPTIVE")
    assert "OUTCOME must be success, dropped or ignored" in \
        err(c, "SL.RELEASE", key, lease, "OUTCOME", "lost")
    assert "given twice" in err(c, "SL.RELEASE", key, lease, "OUTCOME", "success",
                                "OUTCOME", "success")
    assert "syntax error" in err(c, "SL.RELEASE", key, lease, "LATENCY")
    assert "syntax error" in err(c, "SL.RELEASE", key, lease, "WEIGHT", "1")
    assert "syntax error" in err(c, "SL.LIMIT", key, "POLICY")
    assert "syntax error" in err(c, "SL.LIMIT", key, "BOGUS", "x")
    assert rel(c, key, lease) == 1


def test_fixed_forms_unchanged(c, key):
    a = acq(c, key, 2, 30000)
    b = acq(c, key, 2, 30000)
    assert LEASE.match(a.decode()) and LEASE.match(b.decode())
    assert acq(c, key, 2, 30000) is None
    assert "weight 3 exceeds max_in_flight 2" in err(c, "SL.ACQUIRE", key, 2, 30000,
                                                          "WEIGHT", 3)
    # options of an adaptive release are an error on a fixed lease
    assert "this lease is a fixed one" in err(c, "SL.RELEASE", key, a, "LATENCY", "5")
    assert "this lease is a fixed one" in err(c, "SL.RELEASE", key, a, "OUTCOME", "dropped")
    assert rel(c, key, a) == 1
    assert rel(c, key, a) == 0
    w = acq(c, key, 2, 30000, "WEIGHT", 1)
    assert w is not None
    assert acq(c, key, 2, 30000) is None
    assert rel(c, key, b) == 1 and rel(c, key, w) == 1
    assert limit(c, key) is None, "a fixed limit has no adaptive limiter"


def test_fixed_and_adaptive_on_one_key_are_independent(c, key):
    f = acq(c, key, 1, 30000)
    assert f is not None
    assert acq(c, key, 1, 30000) is None
    a = acq(c, key, 1, 30000, "ADAPTIVE", "ESTIMATOR", "aimd", "MIN", 1, "INITIAL", 1)
    assert a is not None, "the fixed lease does not count against the adaptive limit"
    assert acq(c, key, 1, 30000, "ADAPTIVE", "ESTIMATOR", "aimd", "MIN", 1, "INITIAL", 1) is None
    assert limit(c, key)["in_flight"] == 1
    assert rel(c, key, a) == 1
    assert acq(c, key, 1, 30000) is None, "the fixed lease is still held"
    assert rel(c, key, f) == 1
    assert limit(c, key)["admitted"] == 1


# ---- priorities ----

def test_priorities_shed_sheddable_first(c, key):
    """limit 10; reserves: critical 20% (2 slots), default 10% (1 slot). A class is admitted
    while in_flight < limit minus the unused reserves of the more important classes that are
    held (asked within idle, 1 s)."""
    base = (10, 30000, "ADAPTIVE", "ESTIMATOR", "aimd", "MIN", 10, "INITIAL", 10)
    held = [acq(c, key, *base) for _ in range(7)]
    assert all(held)
    # critical sees the whole limit: 7 < 10
    crit = acq(c, key, *base, "PRIORITY", "critical")
    assert crit is not None
    # sheddable: 8 < 10 - (2 - 1 critical unused) - (1 - 7 -> 0 default unused) = 9: admitted
    shed1 = acq(c, key, *base, "PRIORITY", "sheddable")
    assert shed1 is not None
    # 9 < 9 is false: refused; and default is refused too (9 < 10 - 1)
    assert acq(c, key, *base, "PRIORITY", "sheddable") is None
    assert acq(c, key, *base, "PRIORITY", 2) is None
    assert acq(c, key, *base) is None
    # critical is still admitted: 9 < 10
    crit2 = acq(c, key, *base, "PRIORITY", 0)
    assert crit2 is not None
    # and then the limit is full for everyone
    assert acq(c, key, *base, "PRIORITY", "critical") is None
    st = limit(c, key)
    assert st["limit"] == 10
    assert st["in_flight"] == 10
    assert st["in_flight_by_priority"] == [2, 7, 1]
    assert (st["refused_critical"], st["refused_default"], st["refused_sheddable"]) == (1, 1, 2)
    assert (st["admitted"], st["refused"]) == (10, 4)
    for lease in held + [crit, crit2, shed1]:
        assert rel(c, key, lease) == 1
    assert limit(c, key)["in_flight"] == 0


# ---- policies ----

def test_policy_acquire_and_release(c, key):
    lease = acq(c, key, "POLICY", "back")
    assert LEASE.match(lease.decode())
    st = limit(c, key, "POLICY", "back")
    assert (st["estimator"], st["limit"], st["max_limit"], st["in_flight"]) == ("aimd", 10, 10, 1)
    assert limit(c, key) is None, "the policy's key is not the ad-hoc key"
    # the release names the policy: without it the lease is not this key's ad-hoc one
    assert rel(c, key, lease) == 0
    assert rel(c, key, lease, "POLICY", "back", "LATENCY", "3") == 1
    assert limit(c, key, "POLICY", "back")["completed"] == 1


def test_policy_key_separate_from_adhoc_key(c, key):
    a = acq(c, key, 1, 30000, "ADAPTIVE", "ESTIMATOR", "aimd", "MIN", 1, "INITIAL", 1)
    p = acq(c, key, "POLICY", "back")
    assert a is not None and p is not None
    assert limit(c, key)["in_flight"] == 1
    assert limit(c, key)["max_limit"] == 1
    assert limit(c, key, "POLICY", "back")["in_flight"] == 1
    assert rel(c, key, a, "POLICY", "back") == 0
    assert rel(c, key, p) == 0
    assert rel(c, key, a) == 1
    assert rel(c, key, p, "POLICY", "back") == 1


def test_an_adhoc_key_never_reaches_a_policy_key(c, key):
    """A key may hold any bytes, the separator between a policy's name and its
    key among them: the ad-hoc key "back\\x1fK" is not policy back's key K."""
    p = acq(c, key, "POLICY", "back")
    forged = b"back\x1f" + key.encode()
    a = acq(c, forged, 1, 30000, "ADAPTIVE", "ESTIMATOR", "aimd", "MIN", 1, "INITIAL", 1)
    assert p is not None and a is not None
    assert limit(c, key, "POLICY", "back")["in_flight"] == 1
    assert limit(c, forged)["in_flight"] == 1
    assert limit(c, forged)["max_limit"] == 1
    assert rel(c, forged, p) == 0
    assert rel(c, key, p, "POLICY", "back") == 1
    assert rel(c, forged, a) == 1


def test_policy_errors(c, key):
    assert "policy 'parts' has partitions: name one with PARTITION" in \
        err(c, "SL.ACQUIRE", key, "POLICY", "parts")
    assert "unknown partition 'gold' for policy 'parts'" in \
        err(c, "SL.ACQUIRE", key, "POLICY", "parts", "PARTITION", "gold")
    assert "unknown adaptive policy 'nope'" in err(c, "SL.ACQUIRE", key, "POLICY", "nope")
    assert "policy 'rate' is a rate limit" in err(c, "SL.ACQUIRE", key, "POLICY", "rate")
    lease = acq(c, key, "POLICY", "parts", "PARTITION", "batch", "PRIORITY", "sheddable")
    assert lease is not None
    assert limit(c, key, "POLICY", "parts")["in_flight_by_priority"] == [0, 0, 1]
    assert rel(c, key, lease, "POLICY", "parts") == 1


def test_policies_lists_the_adaptive_ones(srv):
    """SL.POLICIES (RESP3, a map per policy) and GET /v1/policies show each
    adaptive policy after the rate ones, with what its config says."""
    def plain(v):
        if isinstance(v, bytes):
            return v.decode()
        if isinstance(v, dict):
            return {plain(k): plain(x) for k, x in v.items()}
        return [plain(x) for x in v] if isinstance(v, list) else v

    with srv.conn() as r3:
        r3.call("HELLO", "3")
        got = {p["name"]: p for p in plain(r3.call("SL.POLICIES"))}
    assert list(got) == ["rate", "back", "parts"]
    back = got["back"]
    assert back["algorithm"] == "adaptive" and back["estimator"] == "aimd"
    assert (back["min_limit"], back["max_limit"], back["initial_limit"]) == (10, 10, 10)
    assert back["ttl_ms"] == 30000 and back["idle_ms"] == 1000
    assert back["parameters"] == {"backoff": "90%", "timeout": "5s"}
    assert back["reserve"] == {"critical": "20%", "default": "10%", "sheddable": "0%"}
    assert back["partitions"] == []
    assert got["parts"]["partitions"] == [{"name": "live", "share": "90%", "lend": 1},
                                          {"name": "batch", "share": "10%", "lend": 1}]
    status, _, body = http(srv.url + "/v1/policies")
    assert status == 200
    js = {p["name"]: p for p in body["policies"]}
    assert list(js) == ["rate", "back", "parts"]
    for name in ("back", "parts"):
        for field in ("algorithm", "estimator", "min_limit", "max_limit", "initial_limit",
                      "ttl_ms", "parameters", "reserve", "idle_ms"):
            assert js[name][field] == got[name][field], (name, field)
    assert js["parts"]["partitions"][1] == {"name": "batch", "share": "10%", "lend": True}


def test_reload_keeps_leases_and_clamps_the_estimate(config_server, key):
    text = """
policies:
  pool:
    algorithm: adaptive
    estimator: aimd
    max_limit: 20
    min_limit: 2
    initial_limit: 20
"""
    s = config_server(text)
    cl = s.redis()
    leases = [acq(cl, key, "POLICY", "pool") for _ in range(3)]
    assert all(leases)
    st = limit(cl, key, "POLICY", "pool")
    assert (st["limit"], st["max_limit"], st["in_flight"]) == (20, 20, 3)
    write(s.config, text.replace("max_limit: 20", "max_limit: 8").replace("initial_limit: 20",
                                                                         "initial_limit: 8"))
    os.kill(s.proc.pid, signal.SIGHUP)
    deadline = time.monotonic() + 10
    while "reloaded" not in s.stderr():
        assert time.monotonic() < deadline, "the reload was not logged:\n" + s.stderr()
        time.sleep(0.05)
    # the key's limiter holds the new config at once, before any acquire
    st = limit(cl, key, "POLICY", "pool")
    assert (st["limit"], st["min_limit"], st["max_limit"]) == (8, 2, 8)
    assert st["in_flight"] == 3 and st["admitted"] == 3
    leases.append(acq(cl, key, "POLICY", "pool"))
    st = limit(cl, key, "POLICY", "pool")
    assert (st["limit"], st["min_limit"], st["max_limit"]) == (8, 2, 8)
    assert st["in_flight"] == 4 and st["admitted"] == 4
    for lease in leases:
        assert rel(cl, key, lease, "POLICY", "pool") == 1
    assert "adaptive limit changed" in s.stderr()
    cl.close()


# ---- HTTP ----

def test_http_acquire_release_limit(srv, key):
    body = {"key": key, "max_in_flight": 2, "ttl_ms": 30000, "estimator": "aimd",
            "min_limit": 2, "initial_limit": 2}
    st, _, j = http(srv.url + "/v1/acquire", "POST", body)
    assert st == 200, j
    assert j["admitted"] is True
    assert LEASE.match(j["lease"])
    assert (j["limit"], j["in_flight"], j["remaining"]) == (2, 1, 1)
    st, _, j2 = http(srv.url + "/v1/acquire", "POST", body)
    assert st == 200 and (j2["in_flight"], j2["remaining"]) == (2, 0)
    st, h, j3 = http(srv.url + "/v1/acquire", "POST", body)
    assert st == 503, j3
    assert j3["admitted"] is False
    assert j3["reason"] == "full"
    assert int(h["Retry-After"]) >= 1
    assert "lease" not in j3
    st, _, lim = http(srv.url + "/v1/limit?key=" + urllib.request.quote(key))
    assert st == 200
    assert (lim["estimator"], lim["limit"], lim["in_flight"], lim["admitted"], lim["refused"]) \
        == ("aimd", 2, 2, 2, 1)
    assert lim["priorities"]["default"] == {"in_flight": 2, "refused": 1}
    st, _, r = http(srv.url + "/v1/release", "POST",
                    {"key": key, "lease": j["lease"], "latency_ms": 4.5, "outcome": "success"})
    assert (st, r) == (200, {"released": True})
    st, _, r = http(srv.url + "/v1/release", "POST", {"key": key, "lease": j["lease"]})
    assert (st, r) == (200, {"released": False})
    st, _, r = http(srv.url + "/v1/release", "POST", {"key": key, "lease": j2["lease"]})
    assert r == {"released": True}
    # the same limiter over RESP
    cl = srv.redis()
    assert limit(cl, key)["completed"] == 2
    cl.close()


def test_http_policy_and_limit_404(srv, key):
    st, _, j = http(srv.url + "/v1/acquire", "POST",
                    {"key": key, "policy": "parts", "partition": "live", "priority": "critical"})
    assert st == 200, j
    st, _, lim = http(srv.url + "/v1/limit?policy=parts&key=" + urllib.request.quote(key))
    assert st == 200 and lim["priorities"]["critical"]["in_flight"] == 1
    st, _, nf = http(srv.url + "/v1/limit?key=" + urllib.request.quote(key))
    assert st == 404, "the ad-hoc key has no limiter"
    assert nf["error"] == "no adaptive limit for this key"
    st, _, r = http(srv.url + "/v1/release", "POST",
                    {"key": key, "lease": j["lease"], "policy": "parts"})
    assert r == {"released": True}
    st, _, j = http(srv.url + "/v1/limit")
    assert st == 400 and j["field"] == "key"


@pytest.mark.parametrize("path,body,field", [
    ("/v1/acquire", b"{not json", None),
    ("/v1/acquire", {"key": "k", "max_in_flight": 2, "ttl_ms": 100, "bogus": 1}, "bogus"),
    ("/v1/acquire", {"max_in_flight": 2, "ttl_ms": 100}, "key"),
    ("/v1/acquire", {"key": "k", "policy": "back", "max_in_flight": 2}, "policy"),
    ("/v1/acquire", {"key": "k", "max_in_flight": 2, "ttl_ms": 100, "partition": "live"},
     "partition"),
    ("/v1/acquire", {"key": "k", "max_in_flight": 2, "ttl_ms": 100, "priority": "urgent"},
     "priority"),
    ("/v1/acquire", {"key": "k", "policy": "parts"}, "partition"),
    ("/v1/acquire", {"key": "k", "policy": "nope"}, "policy"),
    ("/v1/acquire", {"key": "k", "policy": "rate"}, "policy"),
    ("/v1/release", {"key": "k", "lease": "0" * 23 + "1", "outcome": "lost"}, "outcome"),
    ("/v1/release", {"key": "k", "lease": "0" * 23 + "1", "latency_ms": 0}, "latency_ms"),
    ("/v1/release", {"key": "k", "lease": "0" * 23 + "1", "latency_ms": -2}, "latency_ms"),
    ("/v1/release", {"lease": "0" * 23 + "1"}, "key"),
])
def test_http_400s_name_the_field(srv, path, body, field):
    raw = body if isinstance(body, bytes) else None
    st, _, j = http(srv.url + path, "POST", None if raw else body, raw=raw)
    assert st == 400, j
    assert isinstance(j, dict) and j.get("error"), j
    if field is not None:
        assert j.get("field") == field, j


def test_http_get_acquire_is_405(srv):
    st, h, _ = http(srv.url + "/v1/acquire")
    assert st == 405
    assert "POST" in h.get("Allow", "")


def test_http_token_guards_the_endpoints(make_server, key):
    port = free_port()
    s = make_server(args=["--http-port", str(port), "--http-token", "tok"])
    url = "http://127.0.0.1:%d" % port
    body = {"key": key, "max_in_flight": 2, "ttl_ms": 30000}
    st, h, _ = http(url + "/v1/acquire", "POST", body)
    assert st == 401
    assert http(url + "/v1/limit?key=" + key)[0] == 401
    assert http(url + "/v1/release", "POST", {"key": key, "lease": "0" * 23 + "1"})[0] == 401
    st, _, j = http(url + "/v1/acquire", "POST", body, token="tok")
    assert st == 200
    assert http(url + "/v1/limit?key=" + key, token="tok")[0] == 200
    st, _, r = http(url + "/v1/release", "POST", {"key": key, "lease": j["lease"]}, token="tok")
    assert r == {"released": True}
    s.stop()


# ---- metrics ----

def metrics(url, token=None):
    st, _, text = http(url + "/metrics", token=token)
    assert st == 200
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, val = line.rpartition(" ")
            out[name] = float(val)
    return out


def test_metrics(config_server, key):
    s = config_server(CONFIG)
    cl = s.redis()
    a = acq(cl, key, 1, 30000, "ADAPTIVE", "ESTIMATOR", "aimd", "MIN", 1, "INITIAL", 1)
    assert a is not None
    assert acq(cl, key, 1, 30000, "ADAPTIVE", "ESTIMATOR", "aimd", "MIN", 1, "INITIAL", 1,
               "PRIORITY", "sheddable") is None
    p = acq(cl, key, "POLICY", "back", "PRIORITY", "critical")
    assert p is not None
    m = metrics(s.url)
    req = 'sluice_adaptive_requests_total{policy="%s",priority="%s",result="%s"}'
    assert m[req % ("", "default", "admitted")] == 1
    assert m[req % ("", "sheddable", "shed")] == 1
    assert m[req % ("", "critical", "admitted")] == 0
    assert m[req % ("back", "critical", "admitted")] == 1
    assert m[req % ("back", "default", "shed")] == 0
    assert m['sluice_adaptive_keys{policy=""}'] == 1
    assert m['sluice_adaptive_keys{policy="back"}'] == 1
    assert m['sluice_adaptive_keys{policy="parts"}'] == 0
    assert m['sluice_adaptive_limit{policy=""}'] == 1
    assert m['sluice_adaptive_limit{policy="back"}'] == 10
    assert m['sluice_adaptive_in_flight{policy=""}'] == 1
    assert m['sluice_adaptive_in_flight{policy="back"}'] == 1
    assert m["sluice_adaptive_evictions_total"] == 0
    assert rel(cl, key, a) == 1 and rel(cl, key, p, "POLICY", "back") == 1
    m = metrics(s.url)
    assert m['sluice_adaptive_in_flight{policy=""}'] == 0
    assert m['sluice_adaptive_in_flight{policy="back"}'] == 0
    cl.close()


def test_max_adaptive_keys(make_server, key):
    port = free_port()
    s = make_server(args=["--http-port", str(port), "--max-adaptive-keys", "2"])
    url = "http://127.0.0.1:%d" % port
    cl = s.redis()
    args = (5, 30000, "ADAPTIVE", "ESTIMATOR", "aimd", "MIN", 5, "INITIAL", 5)
    # two idle keys, then a third: one of the idle ones is evicted
    for k in ("a", "b"):
        assert rel(cl, key + k, acq(cl, key + k, *args)) == 1
    c3 = acq(cl, key + "c", *args)
    assert c3 is not None
    m = metrics(url)
    assert m["sluice_adaptive_evictions_total"] == 1
    assert m['sluice_adaptive_keys{policy=""}'] == 2
    gone = [k for k in ("a", "b") if limit(cl, key + k) is None]
    assert len(gone) == 1
    # both keys now hold leases: a third key cannot be made
    kept = "b" if gone == ["a"] else "a"
    held = acq(cl, key + kept, *args)
    assert held is not None
    msg = err(cl, "SL.ACQUIRE", key + "d", *args)
    assert msg, "a key past the cap with none idle is an error reply"
    assert limit(cl, key + "d") is None
    assert metrics(url)["sluice_adaptive_evictions_total"] == 1
    assert rel(cl, key + "c", c3) == 1 and rel(cl, key + kept, held) == 1
    cl.close()


# ---- many clients ----

def test_many_clients_never_exceed_the_limit(srv, key):
    args = (5, 30000, "ADAPTIVE", "ESTIMATOR", "aimd", "MIN", 5, "INITIAL", 5)
    lock = threading.Lock()
    state = {"held": 0, "most": 0, "admitted": 0, "errors": []}

    def run():
        cl = srv.redis()
        try:
            for _ in range(200):
                lease = acq(cl, key, *args)
                if lease is None:
                    continue
                with lock:
                    state["held"] += 1
                    state["admitted"] += 1
                    state["most"] = max(state["most"], state["held"])
                # count down before the release: the slot is free only after it
                with lock:
                    state["held"] -= 1
                if rel(cl, key, lease, "LATENCY", "1") != 1:
                    state["errors"].append(lease)
        except Exception as e:  # reported below
            state["errors"].append(e)
        finally:
            cl.close()

    threads = [threading.Thread(target=run) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not state["errors"]
    assert state["most"] <= 5
    st = limit(srv.redis(), key)
    assert st["in_flight"] == 0
    assert st["limit"] == 5
    assert st["admitted"] == state["admitted"]
    assert st["admitted"] + st["refused"] == 1600
    assert st["completed"] == st["admitted"]
