"""SL.DECIDE CHARGE through sluiced, through redis-py, on every store: its own memory,
a central Redis (the module's SL.DECIDE, or the script without it), a Redis Cluster,
--split, and the sync strategy, which passes a window's charge to the central and
refuses a leased rate limit's with words that say why. Everywhere a charge is admitted,
leaves the key in debt so that the next takes are refused, and is given back by REFUND
(docs/commands.md)."""

import os
import sys

import pytest
import redis

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from redis_cluster import make_cluster  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "backend"))
from redis_harness import make_redis  # noqa: E402,F401 (a fixture)

HOUR_NS = 3600 * 10**9


def decide(r, op, key, algo, cost, limit=10):
    return r.execute_command("SL.DECIDE", op, "0", 1, key, algo, limit, HOUR_NS, 0, cost,
                             0, 0, 0)


def charged_and_given_back(r, key, algo):
    """15 of 10 an hour charged: admitted, nothing remains, takes refused; 15 given back:
    10 remain again."""
    got = decide(r, "CHARGE", key, algo, 15)
    assert got[:4] == [-1, 1, 10, 0], got
    assert got[5] > 0, got  # reset_after: the key holds a debt
    got = decide(r, "TAKE", key, algo, 1)
    assert got[:2] == [0, 0], got
    assert decide(r, "REFUND", key, algo, 15) == 15
    got = decide(r, "PEEK", key, algo, 0)
    assert got[:4] == [-1, 1, 10, 10], got


ALGOS = ["gcra", "token_bucket", "leaky_bucket", "fixed_window", "sliding_window"]


def test_on_sluiceds_own_store(r, key):
    for algo in ALGOS:
        charged_and_given_back(r, "%s:%s" % (key, algo), algo)
    with pytest.raises(redis.ResponseError, match="a sliding_log cannot owe"):
        decide(r, "CHARGE", key + ":log", "sliding_log", 1)


@pytest.mark.parametrize("engine", ["module", "script"])
def test_on_a_central_redis(make_redis, make_server, engine):
    central = make_redis(module=(engine == "module"))
    s = make_server(args=["--store", "redis://127.0.0.1:%d" % central.port,
                          "--store-timeout-ms", "2000"])
    r = redis.Redis(host="127.0.0.1", port=s.port, socket_timeout=20)
    for algo in ALGOS:
        charged_and_given_back(r, "central:" + algo, algo)
    with pytest.raises(redis.ResponseError, match="a sliding_log cannot owe"):
        decide(r, "CHARGE", "central:log", "sliding_log", 1)
    r.close()


def test_on_a_redis_cluster(make_redis, make_server):
    cluster = make_cluster(make_redis, primaries=3, replicas=0, module=True)
    s = make_server(args=["--store", "redis-cluster://" + cluster.seeds(),
                          "--store-timeout-ms", "2000"])
    r = redis.Redis(host="127.0.0.1", port=s.port, socket_timeout=20)
    for i, algo in enumerate(ALGOS):
        charged_and_given_back(r, "slot%d:%s" % (i, algo), algo)
    r.close()


def test_split_charges_the_nodes_share(make_server):
    """Each of 2 nodes enforces 5 of the 10: 15 charged leave it 10 in debt."""
    s = make_server(args=["--split", "2"])
    r = redis.Redis(host="127.0.0.1", port=s.port, socket_timeout=20)
    got = decide(r, "CHARGE", "split:k", "gcra", 15)
    assert got[:4] == [-1, 1, 5, 0], got
    # 15 intervals of 720 s owed, the share's tolerance 5 of them
    assert got[5] == 15 * 720 * 10**9, got
    assert decide(r, "TAKE", "split:k", "gcra", 1)[:2] == [0, 0]
    assert decide(r, "REFUND", "split:k", "gcra", 15) == 15
    r.close()


def test_sync_refuses_a_leased_rate_and_passes_a_window(make_redis, make_server):
    central = make_redis(module=True)
    url = "sync+redis://127.0.0.1:%d?node=0&nodes=1&interval_ms=200" % central.port
    s = make_server(args=["--store", url, "--store-timeout-ms", "2000"])
    r = redis.Redis(host="127.0.0.1", port=s.port, socket_timeout=20)
    for algo in ("gcra", "token_bucket", "leaky_bucket"):
        with pytest.raises(redis.ResponseError, match="a charge of a rate limit leased by sync"):
            decide(r, "CHARGE", "sync:" + algo, algo, 15)
    for algo in ("fixed_window", "sliding_window"):
        charged_and_given_back(r, "sync:" + algo, algo)
    r.close()
