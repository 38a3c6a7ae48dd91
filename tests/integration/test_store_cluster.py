"""sluiced on a Redis Cluster (--store redis-cluster://): each key's state on the primary of
its hash slot, through sluice-redis.so on every node or through the Lua script on none; a
primary killed under load, its replica promoted, and sluiced deciding on the promoted
replica's copy of the state without a restart. Real redis-server 7 nodes made into a cluster
by redis-cli, a real sluiced (ASan + UBSan), redis-py, 127.0.0.1 only."""

import os
import signal
import sys
import time

import pytest
import redis

from conftest import ROOT

sys.path.insert(0, os.path.join(ROOT, "tests", "lib"))
sys.path.insert(0, os.path.join(ROOT, "tests", "backend"))
from redis_cluster import make_cluster, slot_of  # noqa: E402
from redis_harness import make_redis  # noqa: E402,F401 (a fixture)


def sluiced_on(make_server, cluster, *flags):
    s = make_server(args=["--store", "redis-cluster://" + cluster.seeds()] + list(flags))
    return s, redis.Redis(host="127.0.0.1", port=s.port, socket_timeout=20)


def store_up(r, timeout=20):
    """INFO store once every worker is connected to every primary: each worker's
    transport connects by itself, and its health is looked at every 100 ms."""
    deadline = time.monotonic() + timeout
    while True:
        info = r.info("store")
        if info["store_state"] == "up" or time.monotonic() > deadline:
            return info
        time.sleep(0.05)


def keys_on(owners, primary, n, prefix):
    """n keys whose slot the primary at port serves."""
    out, i = [], 0
    while len(out) < n:
        k = "%s:%d" % (prefix, i)
        if owners[slot_of(k)][0] == primary:
            out.append(k)
        i += 1
    return out


@pytest.mark.parametrize("engine", ["module", "script"])
def test_each_key_lives_on_its_slots_primary(make_redis, make_server, engine):
    cluster = make_cluster(make_redis, primaries=3, replicas=0, module=(engine == "module"))
    s, r = sluiced_on(make_server, cluster)
    owners = cluster.slots()
    primaries = sorted({p for p, _ in owners.values()})
    keys = [k for p in primaries for k in keys_on(owners, p, 10, "live:%d" % p)]
    for k in keys:
        # max_burst 2: three allowed, then limited, wherever the key lives.
        got = [r.execute_command("CL.THROTTLE", k, 2, 1, 60)[0] for _ in range(4)]
        assert got == [0, 0, 0, 1], (k, got)
        owner = cluster.index_of(owners[slot_of(k)][0])
        assert cluster.clients[owner].exists(k) == 1, k
    info = store_up(r)
    assert info["store"] == "redis-cluster" and info["store_state"] == "up", info
    assert info["store_engine"] == ("module" if engine == "module" else "lua")
    assert info["store_errors"] == 0
    assert info["decisions_fail_open"] == info["decisions_fail_closed"] == 0


def test_a_failover_keeps_the_state_and_needs_no_restart(make_redis, make_server):
    cluster = make_cluster(make_redis, primaries=3, replicas=1)
    s, r = sluiced_on(make_server, cluster, "--on-store-error", "fail_closed")
    owners = cluster.slots()
    key = "fo:user"
    victim_port = owners[slot_of(key)][0]
    victim = cluster.index_of(victim_port)
    heir = next(i for i in range(6)
                if cluster.info(i, "replication").get("master_port") == victim_port)
    other = next(p for p, _ in owners.values() if p != victim_port)
    # max_burst 1: two takes spend the key's burst; the replica holds that state.
    assert [r.execute_command("CL.THROTTLE", key, 1, 1, 60)[0] for _ in range(2)] == [0, 0]
    deadline = time.monotonic() + 20
    while cluster.info(heir, "replication").get("slave_repl_offset", -1) < \
            cluster.info(victim, "replication")["master_repl_offset"]:
        assert time.monotonic() < deadline, "the replica never caught up"
        time.sleep(0.05)

    os.kill(cluster.nodes[victim].proc.pid, signal.SIGKILL)
    cluster.nodes[victim].proc.wait(timeout=10)
    # Meanwhile every check is answered: the dead primary's by --on-store-error, the
    # others by the store.
    for k in keys_on(owners, other, 5, "fo:other"):
        assert r.execute_command("CL.THROTTLE", k, 1, 1, 60)[0] == 0
    cluster.wait_ok(check=lambda: cluster.info(heir, "replication")["role"] == "master")

    # The same sluiced reaches the promoted replica: a fresh key of its slots is allowed
    # (fail_closed would refuse it), and the spent key is still spent, with the store's
    # retry after (about a minute) rather than the fallback's second.
    deadline = time.monotonic() + 30
    fresh = iter(keys_on(owners, victim_port, 1000, "fo:fresh"))
    while r.execute_command("CL.THROTTLE", next(fresh), 1, 1, 60)[0] != 0:
        assert time.monotonic() < deadline, "sluiced never decided on the promoted replica"
        time.sleep(0.1)
    limited, limit, remaining, retry_after, _ = r.execute_command("CL.THROTTLE", key, 1, 1, 60)
    assert (limited, limit, remaining) == (1, 2, 0)
    assert retry_after > 1
    assert store_up(r)["store_state"] == "up"
