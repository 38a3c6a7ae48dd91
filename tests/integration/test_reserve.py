"""Charge after the fact (issue 20, item 2): SL.RESERVE takes a request's estimates under a
policy and answers an id; SL.SETTLE, with the actual amounts, gives back what was not used or
charges the excess, once. Over RESP and HTTP, on the embedded store and on a central Redis
(module and script), under concurrency: no unit is lost or created."""

import os
import random
import signal
import sys
import threading
import time

import pytest
import requests

from conftest import Sluiced, write
from respclient import Error, as_map

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from redis_server import RedisServer  # noqa: E402
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "backend"))
from redis_harness import make_redis  # noqa: E402,F401 (a fixture)

# Windows of 10000 days: the current one runs from 2024 to 2052, so that a count read back
# is exactly what was taken (no refill, no window turning during a test).
CONFIG = """\
policies:
  chat:
    key: "chat:{key}"
    limits:
      - {name: rpm, limit: 1000000, period: 10000d, algorithm: fixed_window}
      - {name: tpm, limit: 100000000, period: 10000d, algorithm: fixed_window, cost: tokens}
    global:
      limits: [{name: tpm, limit: 1000000000, period: 10000d, algorithm: fixed_window,
                cost: tokens}]
  rate:
    limits:
      - {name: rpm, limit: 10, period: 1h}
      - {name: tpm, limit: 1000, period: 1h, cost: tokens}
  log: {limit: 10, period: 1h, algorithm: sliding_log}
  dry: {limit: 1, period: 1h, shadow: true}
"""


def text(v):
    return v.decode() if isinstance(v, bytes) else v


def m(v):
    return {text(k): (text(x) if isinstance(x, bytes) else x) for k, x in as_map(v).items()}


def reserve(c, *args):
    return m(c.call("SL.RESERVE", *args))


def settle(c, *args):
    d = m(c.call("SL.SETTLE", *args))
    d["limits"] = {x["name"]: x["adjusted"] for x in map(m, d["limits"])}
    return d


def usage(c, key, pol="chat"):
    return {x["name"]: x["used"] for x in map(m, c.call("SL.USAGE", key, "POLICY", pol))}


@pytest.fixture
def sd(config_server):
    return config_server(CONFIG)


def test_a_settle_gives_back_what_the_estimate_took_beyond_the_actual(sd):
    with sd.conn() as c:
        d = reserve(c, "chat", "a", "TOKENS", 1000)
        assert (d["allowed"], d["ttl_ms"]) == (1, 600000), d
        assert usage(c, "a") == {"chat.rpm": 1, "chat.tpm": 1000, "chat.global.tpm": 1000}
        s = settle(c, d["reservation"], "TOKENS", 300)
        assert s["settled"] == 1, s
        assert s["limits"] == {"chat.rpm": 0, "chat.tpm": -700, "chat.global.tpm": -700}, s
        assert usage(c, "a") == {"chat.rpm": 1, "chat.tpm": 300, "chat.global.tpm": 300}


def test_a_settle_charges_the_excess_and_the_debt_delays_the_next_take(sd):
    with sd.conn() as c:
        d = reserve(c, "rate", "b", "TOKENS", 100)
        assert d["allowed"] == 1, d
        s = settle(c, d["reservation"], "TOKENS", 1500)  # 500 beyond the whole budget
        assert (s["settled"], s["limits"]) == (1, {"rate.rpm": 0, "rate.tpm": 1400}), s
        p = m(c.call("SL.POLICY", "rate", "b", "TOKENS", 1))
        assert (p["allowed"], p["binding"]) == (0, "rate.tpm"), p
        assert p["retry_after_ms"] > 1000, "a debt of 500 tokens at 1000/h waits: %r" % (p,)


def test_cost_and_tokens_left_out_are_the_estimates(sd):
    with sd.conn() as c:
        d = reserve(c, "chat", "c", "COST", 3, "TOKENS", 50)
        s = settle(c, d["reservation"], "COST", 1)
        assert s["limits"] == {"chat.rpm": -2, "chat.tpm": 0, "chat.global.tpm": 0}, s
        assert usage(c, "c") == {"chat.rpm": 1, "chat.tpm": 50, "chat.global.tpm": 50}


def test_a_reservation_settles_once(sd):
    with sd.conn() as c:
        d = reserve(c, "chat", "d", "TOKENS", 100)
        assert settle(c, d["reservation"], "TOKENS", 0)["settled"] == 1
        again = settle(c, d["reservation"], "TOKENS", 0)
        assert (again["settled"], again["limits"]) == (0, {}), again
        assert usage(c, "d")["chat.tpm"] == 0, "the second settle gave nothing back"


def test_a_reservation_not_settled_within_its_ttl_stays_charged(sd):
    with sd.conn() as c:
        d = reserve(c, "chat", "e", "TOKENS", 100, "TTL", 200)
        assert d["ttl_ms"] == 200
        time.sleep(0.5)
        s = settle(c, d["reservation"], "TOKENS", 0)
        assert s["settled"] == 0, s
        assert usage(c, "e")["chat.tpm"] == 100, "charged at the estimate"


def test_an_id_forged_with_a_larger_estimate_settles_nothing(sd):
    with sd.conn() as c:
        d = reserve(c, "chat", "f", "TOKENS", 10)
        rid = d["reservation"]
        # The tokens estimate is the 8 bytes at offset 33 (hex digits 66 .. 82).
        forged = rid[:66] + "%016x" % 1000000 + rid[82:]
        assert forged != rid
        s = settle(c, forged, "TOKENS", 0)
        assert s["settled"] == 0, s
        assert usage(c, "f")["chat.tpm"] == 10, "nothing was given back"
        assert settle(c, rid, "TOKENS", 0)["settled"] == 1, "the real one still settles"


def test_a_refused_reservation_takes_nothing_and_has_no_id(sd):
    with sd.conn() as c:
        d = reserve(c, "rate", "g", "TOKENS", 5000)
        assert (d["allowed"], d["reservation"], d["binding"]) == (0, None, "rate.tpm"), d
        assert usage(c, "g", "rate") == {"rate.rpm": 0, "rate.tpm": 0}


def test_bad_ids_and_amounts_are_refused_by_name(sd):
    with sd.conn() as c:
        for rid, words in [("zz", "not hexadecimal"), ("abc", "odd number"),
                           ("00" * 60, "unknown version")]:
            with pytest.raises(Error) as e:
                c.call("SL.SETTLE", rid)
            assert words in str(e.value), (rid, str(e.value))
        d = reserve(c, "chat", "h", "TOKENS", 10)
        with pytest.raises(Error) as e:
            c.call("SL.SETTLE", d["reservation"], "TOKENS", -1)
        assert "tokens" in str(e.value)
        with pytest.raises(Error) as e:
            c.call("SL.RESERVE", "chat", "h", "TTL", 0)
        assert "TTL must be 1 to 86400000 ms" in str(e.value)
        with pytest.raises(Error) as e:
            c.call("SL.RESERVE", "chat", "h", "TTL", 5, "TTL", 6)
        assert "given twice" in str(e.value)


def test_what_cannot_owe_is_refused_before_anything_is_settled(sd):
    with sd.conn() as c:
        d = reserve(c, "log", "i", "COST", 2)
        with pytest.raises(Error) as e:
            c.call("SL.SETTLE", d["reservation"], "COST", 3)
        assert "sliding_log, which cannot owe" in str(e.value)
        s = settle(c, d["reservation"], "COST", 1)  # at or below the estimate it settles
        assert s["limits"] == {"log": -1}, s


def test_a_policy_changed_since_the_reservation_keeps_it_charged(sd):
    with sd.conn() as c:
        d = reserve(c, "chat", "j", "TOKENS", 100)
        write(sd.config, CONFIG.replace("{name: tpm, limit: 100000000", "{name: tokens, limit: 100000000"))
        os.kill(sd.proc.pid, signal.SIGHUP)
        deadline = time.time() + 10
        while time.time() < deadline:
            names = list(usage(c, "j"))
            if "chat.tokens" in names:
                break
            time.sleep(0.05)
        assert "chat.tokens" in names
        with pytest.raises(Error) as e:
            c.call("SL.SETTLE", d["reservation"], "TOKENS", 0)
        assert "has changed since the reservation" in str(e.value)


def test_over_http(sd):
    r = requests.post(sd.url + "/v1/reserve", json={"policy": "chat", "key": "k", "tokens": 400,
                                                    "ttl_ms": 60000})
    assert r.status_code == 200, r.text
    body = r.json()
    assert (body["allowed"], body["ttl_ms"]) == (True, 60000), body
    assert "chat.tpm" in r.headers["RateLimit"]
    s = requests.post(sd.url + "/v1/settle", json={"reservation": body["reservation"],
                                                   "tokens": 150})
    assert s.status_code == 200, s.text
    assert s.json() == {"settled": True, "limits": [
        {"name": "chat.rpm", "adjusted": 0}, {"name": "chat.tpm", "adjusted": -250},
        {"name": "chat.global.tpm", "adjusted": -250}]}
    again = requests.post(sd.url + "/v1/settle", json={"reservation": body["reservation"]})
    assert again.status_code == 409 and again.json()["settled"] is False, again.text
    u = requests.get(sd.url + "/v1/usage", params={"policy": "chat", "key": "k"}).json()
    assert [x["used"] for x in u["limits"]] == [1, 150, 150], u

    refused = requests.post(sd.url + "/v1/reserve", json={"policy": "rate", "key": "k",
                                                          "tokens": 5000})
    assert refused.status_code == 429 and refused.json()["reservation"] is None, refused.text
    for path, payload, field in [
            ("/v1/settle", {"reservation": "zz"}, "reservation"),
            ("/v1/settle", {"reservation": body["reservation"], "extra": 1}, "extra"),
            ("/v1/settle", {"tokens": 1}, "reservation"),
            ("/v1/reserve", {"key": "k", "limit": 5, "period": 60}, "policy")]:
        e = requests.post(sd.url + path, json=payload)
        assert e.status_code == 400 and e.json()["field"] == field, (path, e.text)
    e = requests.get(sd.url + "/v1/check", params={"policy": "chat", "key": "k", "ttl_ms": 5})
    assert e.status_code == 400 and e.json()["field"] == "ttl_ms", e.text
    assert requests.get(sd.url + "/v1/settle").status_code == 405


def no_unit_lost_or_created(s, threads=4, rounds=40):
    """Threads reserve random estimates and settle random actual amounts (some twice, some
    never); in the end each limit holds exactly the actual amounts settled plus the estimates
    of the reservations never settled."""
    expect = {"requests": 0, "tokens": 0}
    lock = threading.Lock()
    errors = []

    def work(seed):
        rnd = random.Random(seed)
        try:
            with s.conn() as c:
                for _ in range(rounds):
                    cost, tokens = rnd.randint(0, 3), rnd.randint(0, 500)
                    d = reserve(c, "chat", "shared", "COST", cost, "TOKENS", tokens)
                    assert d["allowed"] == 1, d
                    if rnd.random() < 0.1:  # never settled: charged at the estimate
                        got = (cost, tokens)
                    else:
                        ac, at = rnd.randint(0, 6), rnd.randint(0, 1000)
                        assert settle(c, d["reservation"], "COST", ac, "TOKENS", at)["settled"]
                        if rnd.random() < 0.3:
                            assert not settle(c, d["reservation"], "TOKENS", 0)["settled"]
                        got = (ac, at)
                    with lock:
                        expect["requests"] += got[0]
                        expect["tokens"] += got[1]
        except BaseException as e:  # reported by the main thread
            errors.append(e)

    ts = [threading.Thread(target=work, args=(i,)) for i in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors, errors[0]
    with s.conn() as c:
        got = usage(c, "shared")
    assert got == {"chat.rpm": expect["requests"], "chat.tpm": expect["tokens"],
                   "chat.global.tpm": expect["tokens"]}, (got, expect)


def test_under_concurrency_no_unit_is_lost_or_created(sd):
    no_unit_lost_or_created(sd)


def test_concurrent_settles_of_one_reservation_settle_it_once(sd):
    with sd.conn() as c:
        d = reserve(c, "chat", "once", "TOKENS", 1000)
    results = []

    def go():
        with sd.conn() as c:
            results.append(settle(c, d["reservation"], "TOKENS", 0)["settled"])

    ts = [threading.Thread(target=go) for _ in range(8)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert sorted(results) == [0] * 7 + [1], results
    with sd.conn() as c:
        assert usage(c, "once")["chat.tpm"] == 0


@pytest.fixture(params=["module", "script"])
def central(request, tmp_path):
    redis = RedisServer(str(tmp_path / "redis"), module=(request.param == "module")).start()
    cfg = tmp_path / "sluice.yaml"
    write(cfg, CONFIG)
    nodes = []
    for i in range(2):
        s = Sluiced(args=["--store", "redis://127.0.0.1:%d" % redis.port, "--config", str(cfg),
                          "--store-timeout-ms", "2000"], workdir=str(tmp_path / ("s%d" % i)))
        os.makedirs(s.workdir, exist_ok=True)
        nodes.append(s.start())
    yield nodes
    for s in nodes:
        s.stop()
    redis.stop()


def test_on_a_central_redis_any_node_settles_what_another_reserved(central):
    a, b = central
    with a.conn() as ca, b.conn() as cb:
        d = reserve(ca, "chat", "x", "TOKENS", 800)
        s = settle(cb, d["reservation"], "TOKENS", 200)
        assert (s["settled"], s["limits"]["chat.tpm"]) == (1, -600), s
        assert settle(ca, d["reservation"])["settled"] == 0
        assert usage(ca, "x")["chat.tpm"] == 200
        d = reserve(ca, "rate", "x", "TOKENS", 10)
        s = settle(cb, d["reservation"], "TOKENS", 1200)
        assert s["limits"]["rate.tpm"] == 1190, s
        p = m(cb.call("SL.POLICY", "rate", "x", "TOKENS", 1))
        assert p["allowed"] == 0, "the debt is the fleet's: %r" % (p,)


def test_on_a_central_redis_no_unit_is_lost_or_created(central):
    no_unit_lost_or_created(central[0], threads=3, rounds=25)


def test_a_settle_whose_client_hangs_up_still_runs_to_its_end(central):
    import socket
    a, _ = central
    with a.conn() as c:
        d = reserve(c, "chat", "gone", "TOKENS", 900)
    rid = d["reservation"]
    cmd = "*4\r\n$9\r\nSL.SETTLE\r\n$%d\r\n%s\r\n$6\r\nTOKENS\r\n$1\r\n0\r\n" % (len(rid), rid)
    s = socket.create_connection(a.addr)
    s.sendall(cmd.encode())
    s.close()  # before the store has answered the first step
    with a.conn() as c:
        deadline = time.time() + 10
        while time.time() < deadline and usage(c, "gone")["chat.global.tpm"] != 0:
            time.sleep(0.05)
        assert usage(c, "gone") == {"chat.rpm": 1, "chat.tpm": 0, "chat.global.tpm": 0}
        assert settle(c, rid)["settled"] == 0


def test_on_sync_a_settle_gives_back_exactly_and_refuses_to_charge_a_leased_rate(tmp_path):
    redis = RedisServer(str(tmp_path / "redis"), module=True).start()
    cfg = tmp_path / "sluice.yaml"
    write(cfg, CONFIG)
    url = "sync+redis://127.0.0.1:%d?node=0&nodes=1&interval_ms=50" % redis.port
    s = Sluiced(args=["--store", url, "--config", str(cfg)], workdir=str(tmp_path / "s"))
    os.makedirs(s.workdir, exist_ok=True)
    s.start()
    try:
        with s.conn() as c:
            d = reserve(c, "chat", "y", "TOKENS", 500)  # windows: decided in Redis
            assert settle(c, d["reservation"], "TOKENS", 700)["limits"]["chat.tpm"] == 200
            assert usage(c, "y")["chat.tpm"] == 700
            d = reserve(c, "rate", "y", "TOKENS", 300)  # rates: on the node's lease
            assert d["allowed"] == 1, d
            s_ = settle(c, d["reservation"], "TOKENS", 100)
            assert s_["limits"] == {"rate.rpm": 0, "rate.tpm": -200}, s_
            d = reserve(c, "rate", "y", "TOKENS", 10)
            with pytest.raises(Error) as e:
                c.call("SL.SETTLE", d["reservation"], "TOKENS", 20)
            assert "'rate.tpm' is a rate leased by sync" in str(e.value), str(e.value)
            # refused before anything was settled: the reservation is still open
            s_ = settle(c, d["reservation"], "TOKENS", 4)
            assert (s_["settled"], s_["limits"]["rate.tpm"]) == (1, -6), s_
    finally:
        s.stop()
        redis.stop()


@pytest.mark.parametrize("engine", ["module", "script"])
def test_on_a_redis_cluster_the_marker_lives_in_its_keys_slot(make_redis, make_server, tmp_path,
                                                              engine):
    """The key's limits and its marker share a slot; the global limit lives in another: a
    settle reaches each on its own primary."""
    from redis_cluster import make_cluster, slot_of
    cluster = make_cluster(make_redis, primaries=3, replicas=0, module=(engine == "module"))
    cfg = tmp_path / "sluice.yaml"
    write(cfg, CONFIG)
    s = make_server(args=["--store", "redis-cluster://" + cluster.seeds(), "--config", str(cfg)])
    with s.conn() as c:
        d = reserve(c, "chat", "z", "TOKENS", 900)
        assert d["allowed"] == 1, d
        markers = []
        for client in cluster.clients:
            markers += [k for k in client.keys("*") if b"\x1freserve\x1f" in k]
        assert len(markers) == 1 and markers[0].startswith(b"{chat:z}\x1freserve\x1f"), markers
        assert slot_of(markers[0].decode("latin-1")) == slot_of("{chat:z}\x1ftpm")
        assert slot_of("{chat:z}\x1ftpm") != slot_of("{\x1fglobal\x1fchat}\x1ftpm")
        st = settle(c, d["reservation"], "TOKENS", 100)
        assert st["limits"] == {"chat.rpm": 0, "chat.tpm": -800, "chat.global.tpm": -800}, st
        assert usage(c, "z") == {"chat.rpm": 1, "chat.tpm": 100, "chat.global.tpm": 100}
        assert settle(c, d["reservation"])["settled"] == 0
