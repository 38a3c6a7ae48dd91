"""Plans from a Redis hash (issue 20, item 3): a policy's `plans: redis:HASH` names a hash
of the central store (field = key, value = tier) that sluiced reads at start and again every
refresh interval; a key's tier is the hash's on every face, an unknown key gets the
default, a value naming no tier is logged and gives the default, a read that fails keeps the
table in force. Real redis-server (and a real Redis Cluster), real sluiced, 127.0.0.1 only."""

import os
import subprocess
import sys
import time

import pytest
import requests

from conftest import ROOT, Sluiced, free_port, write
from respclient import Error, as_map

sys.path.insert(0, os.path.join(ROOT, "tests", "lib"))
sys.path.insert(0, os.path.join(ROOT, "tests", "backend"))
from redis_cluster import make_cluster, slot_of  # noqa: E402
from redis_harness import make_redis  # noqa: E402,F401 (a fixture)
from redis_server import RedisServer  # noqa: E402

CONFIG = """\
policies:
  api:
    limit: 2
    period: 1h
    plans: {redis: "%s", refresh: 200ms}
    tiers:
      free: {limit: 5, period: 1h}
      paid: {limit: 500, period: 1h}
"""


def policy(c, *args):
    return {k.decode() if isinstance(k, bytes) else k: v
            for k, v in as_map(c.call("SL.POLICY", *args)).items()}


def info_plans(c):
    text = c.call("INFO", "plans")
    text = text.decode() if isinstance(text, bytes) else text
    return dict(line.split(":", 1) for line in text.splitlines() if ":" in line)


def wait_for(pred, what, timeout=30):
    deadline = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < deadline, "timed out waiting for " + what
        time.sleep(0.05)


def start(make_server, tmp_path, store_url, hash_name="plans", extra=()):
    cfg = tmp_path / "sluice.yaml"
    write(cfg, CONFIG % hash_name)
    http = free_port()
    s = make_server(args=["--config", str(cfg), "--store", store_url, "--http-port", str(http),
                          "--store-timeout-ms", "2000"] + list(extra))
    s.url = "http://127.0.0.1:%d" % http
    return s


@pytest.fixture
def redis_store(tmp_path):
    s = RedisServer(str(tmp_path / "redis"), module=False).start()
    yield s
    if s.alive():
        s.stop()


def test_a_keys_tier_comes_from_the_hash_on_every_face(make_server, redis_store, tmp_path):
    r = redis_store.client()
    r.hset("plans", mapping={"alice": "paid", "bob": "free", "carol": "gold",
                             "sp ace\x01": "paid"})
    s = start(make_server, tmp_path, "redis://127.0.0.1:%d" % redis_store.port)
    with s.conn() as c:
        assert policy(c, "api", "alice")["limit"] == 500
        assert policy(c, "api", "bob")["limit"] == 5
        assert policy(c, "api", "sp ace\x01")["limit"] == 500, "any bytes make a key"
        assert policy(c, "api", "stranger")["limit"] == 2, "a key the hash does not name"
        assert policy(c, "api", "carol")["limit"] == 2, "a value naming no tier: the default"
        c.send_command("SL.POLICY", "api", "bob", "TIER", "paid")
        e = c.read_reply()
        assert isinstance(e, Error) and e.message == (
            "ERR policy 'api' takes each key's tier from its plans hash: a request cannot "
            "name one"), e
        info = info_plans(c)
        assert info["plans_policies"] == "1", info
        assert "keys=3," in info["plans_api"] and "unknown_tier_fields=1," in info["plans_api"]
    log = s.stderr()
    assert "1 fields name no tier of the policy (e.g. 'carol' -> 'gold')" in log, log
    # HTTP: /v1/check with the policy, and forward-auth
    j = requests.get(s.url + "/v1/check", params={"policy": "api", "key": "alice"}).json()
    assert j["limit"] == 500, j
    a = requests.get(s.url + "/v1/auth/api", headers={"X-Api-Key": "alice"})
    assert a.status_code == 200 and a.headers["X-RateLimit-Limit"] == "500", a.headers
    a = requests.get(s.url + "/v1/auth/api?tier=paid", headers={"X-Api-Key": "bob"})
    assert a.status_code == 400 and a.json()["field"] == "tier", a.text
    a = requests.get(s.url + "/v1/auth/api", headers={"X-Api-Key": "nobody"})
    assert a.headers["X-RateLimit-Limit"] == "2", a.headers
    m = requests.get(s.url + "/metrics").text
    assert 'sluice_plans_keys{policy="api",hash="plans"} 3' in m, m
    assert 'sluice_plans_loaded{policy="api",hash="plans"} 1' in m


def test_a_change_in_the_hash_is_seen_after_the_refresh(make_server, redis_store, tmp_path):
    r = redis_store.client()
    r.hset("plans", mapping={"alice": "paid", "bob": "free"})
    s = start(make_server, tmp_path, "redis://127.0.0.1:%d" % redis_store.port)
    with s.conn() as c:
        assert policy(c, "api", "bob")["limit"] == 5
        r.hset("plans", "bob", "paid")
        r.hdel("plans", "alice")
        wait_for(lambda: policy(c, "api", "bob")["limit"] == 500, "bob's upgrade")
        wait_for(lambda: policy(c, "api", "alice")["limit"] == 2, "alice's removal")
        # the hash gone altogether: every key on the default tier
        r.delete("plans")
        wait_for(lambda: policy(c, "api", "bob")["limit"] == 2, "the hash's removal")


def test_redis_down_at_a_refresh_keeps_the_table(make_server, redis_store, tmp_path):
    r = redis_store.client()
    r.hset("plans", mapping={"alice": "paid"})
    s = start(make_server, tmp_path, "redis://127.0.0.1:%d" % redis_store.port,
              extra=["--on-store-error", "local"])
    with s.conn() as c:
        assert policy(c, "api", "alice")["limit"] == 500
        redis_store.stop()
        wait_for(lambda: int(info_plans(c)["plans_refresh_failures"]) > 0, "a failed refresh")
        assert "state=failing" in info_plans(c)["plans_api"]
        # decided by the local limiter now, on the table read before
        assert policy(c, "api", "alice")["limit"] == 500
        assert "keeping the table read" in s.stderr()
        m = requests.get(s.url + "/metrics").text
        assert 'sluice_plans_loaded{policy="api",hash="plans"} 1' in m
        assert 'sluice_plans_refresh_failures_total{policy="api",hash="plans"} 0' not in m
        # back: read again
        redis_store.start()
        redis_store.client().hset("plans", mapping={"alice": "free"})
        wait_for(lambda: "state=ok" in info_plans(c)["plans_api"], "the recovery")
        wait_for(lambda: policy(c, "api", "alice")["limit"] == 5, "the new table")


def test_with_sync_the_hash_is_read_from_the_central_redis(make_server, redis_store, tmp_path):
    redis_store.client().hset("plans", mapping={"alice": "paid"})
    s = start(make_server, tmp_path, "sync+redis://127.0.0.1:%d?interval_ms=100&node=0&nodes=1"
              % redis_store.port)
    with s.conn() as c:
        assert policy(c, "api", "alice")["limit"] == 500
        assert policy(c, "api", "bob")["limit"] == 2


def test_a_password_and_a_database_of_the_url_are_used(make_server, tmp_path):
    import redis
    rs = RedisServer(str(tmp_path / "authed"), module=False, args=["--requirepass", "s3cret"])

    def ping():
        c = redis.Redis(host="127.0.0.1", port=rs.port, password="s3cret", socket_timeout=2)
        try:
            return c.ping()
        finally:
            c.close()
    rs.ping = ping
    rs.start()
    try:
        rs.client(password="s3cret", db=3).hset("plans", "alice", "paid")
        s = start(make_server, tmp_path, "redis://:s3cret@127.0.0.1:%d/3" % rs.port)
        with s.conn() as c:
            assert policy(c, "api", "alice")["limit"] == 500
    finally:
        rs.stop()


def test_a_start_without_the_hash_starts_on_the_default_tier(make_server, tmp_path):
    port = free_port()  # no Redis there
    s = start(make_server, tmp_path, "redis://127.0.0.1:%d" % port,
              extra=["--on-store-error", "local"])
    with s.conn() as c:
        assert policy(c, "api", "alice")["limit"] == 2
        assert info_plans(c)["plans_age_seconds"] == "-1"
    assert "NOT LOADED" in s.stderr() and "EVERY KEY IS ON THE DEFAULT TIER" in s.stderr()
    m = requests.get(s.url + "/metrics").text
    assert 'sluice_plans_loaded{policy="api",hash="plans"} 0' in m, m


def test_without_a_redis_store_the_config_is_refused(tmp_path):
    cfg = tmp_path / "sluice.yaml"
    write(cfg, CONFIG % "plans")
    s = Sluiced(args=["--config", str(cfg)], workdir=str(tmp_path))
    s.launch()
    assert s.proc.wait(timeout=30) == 2
    err = s.stderr()
    assert "plans: redis:plans reads a hash of the Redis store: it needs --store redis://" in err
    assert "(the store is memory://)" in err, err


def test_a_bad_plans_setting_names_its_line(tmp_path):
    cfg = tmp_path / "sluice.yaml"
    write(cfg, CONFIG.replace("refresh: 200ms", "refresh: 10ms") % "plans")
    s = Sluiced(args=["--config", str(cfg), "--store", "redis://127.0.0.1:1"],
                workdir=str(tmp_path))
    s.launch()
    assert s.proc.wait(timeout=30) == 2
    assert "sluice.yaml:5:" in s.stderr() and "refresh must be a duration from 100ms to 1d" \
        in s.stderr(), s.stderr()


def test_a_million_fields_load(make_server, redis_store, tmp_path):
    n = 1_000_000
    t0 = time.monotonic()
    # redis-cli --pipe: HSET commands in RESP, 1000 fields each
    chunks = []
    for start_at in range(0, n, 1000):
        args = [b"HSET", b"big"]
        for i in range(start_at, start_at + 1000):
            args += [b"user:%07d" % i, b"paid" if i % 3 == 0 else b"free"]
        chunks.append(b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a)
                                                         for a in args))
    out = subprocess.run(["redis-cli", "-h", "127.0.0.1", "-p", str(redis_store.port),
                          "--pipe"], input=b"".join(chunks), capture_output=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    filled = time.monotonic() - t0
    assert redis_store.client().hlen("big") == n
    t0 = time.monotonic()
    s = start(make_server, tmp_path, "redis://127.0.0.1:%d" % redis_store.port, "big")
    took = time.monotonic() - t0
    with s.conn() as c:
        info = info_plans(c)
        assert "keys=%d," % n in info["plans_api"], info
        read_ms = info["plans_api"].split("last_read_ms=")[1].split(",")[0]
        for i in (0, 1, 999_999):
            assert policy(c, "api", "user:%07d" % i)["limit"] == (500 if i % 3 == 0 else 5)
    print("\nfilled a hash of %d fields in %.2f s; sluiced started with it in %.2f s (the "
          "read: %s ms)" % (n, filled, took, read_ms))


def test_in_a_cluster_the_hash_is_read_from_its_slots_primary(make_redis, make_server,
                                                              tmp_path):
    cluster = make_cluster(make_redis, primaries=3, replicas=0, module=False)
    owners = cluster.slots()
    # a hash the first seed does not own: the read follows MOVED to its primary
    name = next(n for n in ("plans:%d" % i for i in range(100))
                if cluster.index_of(owners[slot_of(n)][0]) != 0)
    owner = cluster.index_of(owners[slot_of(name)][0])
    cluster.clients[owner].hset(name, mapping={"alice": "paid", "bob": "free"})
    s = start(make_server, tmp_path, "redis-cluster://" + cluster.seeds(), name)
    with s.conn() as c:
        assert policy(c, "api", "alice")["limit"] == 500
        assert policy(c, "api", "bob")["limit"] == 5
        cluster.clients[owner].hset(name, "bob", "paid")
        wait_for(lambda: policy(c, "api", "bob")["limit"] == 500, "bob's upgrade")


def test_sighup_carries_the_table_over_and_reads_a_changed_policy_again(make_server, redis_store,
                                                                        tmp_path):
    r = redis_store.client()
    r.hset("plans", mapping={"alice": "paid", "carol": "gold"})
    cfg = tmp_path / "sluice.yaml"
    slow = CONFIG.replace("refresh: 200ms", "refresh: 1d") % "plans"
    write(cfg, slow)
    s = make_server(args=["--config", str(cfg), "--store",
                          "redis://127.0.0.1:%d" % redis_store.port])
    with s.conn() as c:
        assert policy(c, "api", "alice")["limit"] == 500
        r.hset("plans", "alice", "free")  # not read before a day
        before = len(s.stderr())
        write(cfg, slow.replace("limit: 500", "limit: 600"))
        s.proc.send_signal(1)  # SIGHUP
        wait_for(lambda: "SIGHUP: reloaded" in s.stderr()[before:], "the reload")
        assert policy(c, "api", "alice")["limit"] == 600, "the table read at start, carried"
        # a tier added: the hash is read again at once, with the new tier
        before = len(s.stderr())
        write(cfg, slow.replace("    tiers:\n", "    tiers:\n      gold: {limit: 50, period: 1h}\n"))
        s.proc.send_signal(1)
        wait_for(lambda: "SIGHUP: reloaded" in s.stderr()[before:], "the second reload")
        wait_for(lambda: policy(c, "api", "carol")["limit"] == 50, "carol's gold tier")
        assert policy(c, "api", "alice")["limit"] == 5
