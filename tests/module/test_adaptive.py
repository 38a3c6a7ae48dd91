"""Adaptive concurrency limits in the module (docs/concurrency.md): SL.ACQUIRE ...
ADAPTIVE and POLICY, SL.RELEASE with LATENCY and OUTCOME, SL.LIMIT. A limiter lives in
the module's memory, not in a key: nothing is written, so nothing is replicated or
persisted, and the replica refuses the acquire as it refuses every write."""

import re
import uuid

import pytest
import redis

from conftest import wait_for

LEASE = re.compile(rb"^[0-9a-f]{24}$")

CONFIG = """\
policies:
  pool:
    algorithm: adaptive
    estimator: aimd
    max_limit: 4
    min_limit: 2
    initial_limit: 4
    reserve: {critical: 50%, default: 0%}
"""


def limit(r, key, *args):
    v = r.execute_command("SL.LIMIT", key, *args)
    if v is None:
        return None
    return {k.decode(): (x.decode() if isinstance(x, bytes) else x)
            for k, x in zip(v[0::2], v[1::2])}


def adhoc(n):
    return [n, 30000, "ADAPTIVE", "ESTIMATOR", "aimd", "MIN", 1, "INITIAL", n]


@pytest.fixture
def key():
    return "ad:%s" % uuid.uuid4().hex[:8]


def test_adhoc_acquire_refuse_release(r, key):
    leases = [r.execute_command("SL.ACQUIRE", key, *adhoc(3)) for _ in range(3)]
    assert all(LEASE.match(x) for x in leases), leases
    assert r.execute_command("SL.ACQUIRE", key, *adhoc(3)) is None
    st = limit(r, key)
    assert (st["estimator"], st["limit"], st["in_flight"]) == ("aimd", 3, 3)
    assert (st["admitted"], st["refused"]) == (3, 1)
    assert r.execute_command("SL.RELEASE", key, leases[0], "LATENCY", "2.5") == 1
    assert r.execute_command("SL.RELEASE", key, leases[0]) == 0, "once only"
    assert r.execute_command("SL.RELEASE", key, leases[1], "OUTCOME", "dropped") == 1
    st = limit(r, key)
    assert st["in_flight"] == 1 and st["completed"] == 2 and st["dropped"] == 1
    assert st["limit"] < 3, "a drop cuts aimd's limit"
    assert r.execute_command("SL.RELEASE", key, leases[2]) == 1
    assert r.exists(key) == 0, "no key is written"


def test_fixed_lease_and_adaptive_lease_on_one_key(r, key):
    fixed = r.execute_command("SL.ACQUIRE", key, 1, 30000)
    adaptive = r.execute_command("SL.ACQUIRE", key, *adhoc(1))
    assert fixed is not None and adaptive is not None
    assert r.exists(key) == 1, "the fixed lease is a key"
    assert r.execute_command("SL.RELEASE", key, adaptive) == 1
    assert r.execute_command("SL.RELEASE", key, fixed) == 1


def test_policy_with_a_reserve(make_server, tmp_path, key):
    cfg = tmp_path / "sluice.yaml"
    cfg.write_text(CONFIG)
    s = make_server("adaptive", module_args=["CONFIG", str(cfg)])
    r = s.client()
    def crit():
        return r.execute_command("SL.ACQUIRE", key, "POLICY", "pool", "PRIORITY", "critical")

    # critical, asking, keeps half of 4: what it holds of its reserve and
    # what is unused of it; default may take the rest
    crits = [crit()]
    got = [r.execute_command("SL.ACQUIRE", key, "POLICY", "pool") for _ in range(3)]
    assert [g is not None for g in got] == [True, True, False]
    crits += [crit(), crit()]
    assert [g is not None for g in crits] == [True, True, False]
    st = limit(r, key, "POLICY", "pool")
    assert st["in_flight_by_priority"] == [2, 2, 0]
    assert st["refused_default"] == 1 and st["refused_critical"] == 1
    assert limit(r, key) is None, "the policy's key is not the ad-hoc key"
    with pytest.raises(redis.ResponseError, match="unknown adaptive policy 'nope'"):
        r.execute_command("SL.ACQUIRE", key, "POLICY", "nope")
    for lease in got[:2] + crits[:2]:
        assert r.execute_command("SL.RELEASE", key, lease, "POLICY", "pool") == 1
    r.close()


def test_nothing_reaches_the_replica(make_server, key):
    primary = make_server("primary")
    replica = make_server("replica", start=False)
    replica.args = ["--replicaof", "127.0.0.1", str(primary.port)]
    replica.start()
    p, rr = primary.client(), replica.client()
    wait_for(lambda: rr.info("replication").get("master_link_status") == "up", "the replica link")
    offset = p.info("replication")["master_repl_offset"]
    leases = [p.execute_command("SL.ACQUIRE", key, *adhoc(2)) for _ in range(3)]
    assert leases[2] is None
    assert p.execute_command("SL.RELEASE", key, leases[0], "LATENCY", "1") == 1
    assert p.info("replication")["master_repl_offset"] == offset, "no write, nothing sent"
    assert limit(rr, key) is None, "the replica holds no limiter"
    with pytest.raises(redis.ResponseError, match="read only replica"):
        rr.execute_command("SL.ACQUIRE", key, *adhoc(2))
    assert limit(p, key)["in_flight"] == 1
    p.close()
    rr.close()
