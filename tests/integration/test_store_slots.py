"""Multi-limit checks on a Redis Cluster whose keys live in several hash slots: no one
command can take them (CROSSSLOT), so sluiced takes them in order and gives back what the
first took when a later one refuses (SL.DECIDE REFUND). The whole stays all or nothing:
SL.TAKEMANY, a policy with a global limit, and PEEKs and RESETs of several slots."""

import os
import sys

import pytest
import redis

from conftest import ROOT

sys.path.insert(0, os.path.join(ROOT, "tests", "lib"))
sys.path.insert(0, os.path.join(ROOT, "tests", "backend"))
from redis_cluster import make_cluster, slot_of  # noqa: E402
from redis_harness import make_redis  # noqa: E402,F401 (a fixture)


def as_map(reply):
    return {reply[i].decode() if isinstance(reply[i], bytes) else reply[i]: reply[i + 1]
            for i in range(0, len(reply), 2)}


def on_other_primaries(owners, n, prefix):
    """n keys, each on a primary none of the others is on."""
    out, seen, i = [], set(), 0
    while len(out) < n:
        k = "%s:%d" % (prefix, i)
        p = owners[slot_of(k)][0]
        if p not in seen:
            seen.add(p)
            out.append(k)
        i += 1
    return out


POLICIES = """\
policies:
  api:
    limit: 5
    period: 1h
    global: {limit: 7, period: 1h}
"""


@pytest.mark.parametrize("engine", ["module", "script"])
def test_all_or_nothing_across_slots(make_redis, make_server, tmp_path, engine):
    cluster = make_cluster(make_redis, primaries=3, replicas=0, module=(engine == "module"))
    conf = tmp_path / "sluice.yaml"
    conf.write_text(POLICIES)
    s = make_server(args=["--store", "redis-cluster://" + cluster.seeds(), "--config", str(conf),
                          "--store-timeout-ms", "2000"])
    r = redis.Redis(host="127.0.0.1", port=s.port, socket_timeout=20)
    owners = cluster.slots()
    a, b, c = on_other_primaries(owners, 3, "many")
    assert len({owners[slot_of(k)][0] for k in (a, b, c)}) == 3

    # a: GCRA 10 an hour, b: GCRA 3, c: a fixed window of 10 (ALGORITHM is per LIMIT
    # group). Three takes of all three pass; the fourth is refused by b, and a (taken
    # before b) is given back: a and c stay at 3 used.
    def takemany():
        return as_map(r.execute_command("SL.TAKEMANY", 3, a, b, c, "LIMIT", 10, "1h",
                                        "LIMIT", 3, "1h", "LIMIT", 10, "1h",
                                        "ALGORITHM", "fixed_window"))
    got = [takemany() for _ in range(4)]
    assert [g["allowed"] for g in got] == [1, 1, 1, 0]
    assert got[3]["rejected_by"] == 1
    results = got[3]["results"]
    assert [as_map(x)["remaining"] for x in results] == [6, 0, 6]  # what each would answer
    assert as_map(r.execute_command("SL.PEEK", a, 10, "1h"))["remaining"] == 6
    assert as_map(r.execute_command("SL.PEEK", c, 10, "1h", "ALGORITHM", "fixed_window"))[
        "remaining"] == 6

    # A policy's key and its global limit ("\\x1fglobal\\x1f{api}", the tag's slot) on
    # two primaries: the global limit (7) binds across keys; a refusal by it gives the
    # key's take back.
    keys = ["user:%d" % i for i in range(40)]
    gslot = slot_of("\x1fglobal\x1f{api}")
    elsewhere = [k for k in keys if owners[slot_of("api:" + k)][0] != owners[gslot][0]]
    assert elsewhere, "every key on the global limit's primary"
    allowed = [as_map(r.execute_command("SL.POLICY", "api", k))["allowed"]
               for k in elsewhere[:9]]
    assert allowed == [1] * 7 + [0] * 2
    # The refused keys were given back: each has its whole limit (5) but the global's.
    for k in elsewhere[7:9]:
        peek = as_map(r.execute_command("SL.PEEK", "api:" + k, 5, "1h", "COST", 0))
        assert peek["remaining"] == 5, (k, peek)

    # PEEK and RESET of several slots at once: one part per key, answered together.
    hour = 3600 * 10**9
    g = lambda algorithm, limit: [algorithm, limit, hour, 0, 1, 0, 0, 0]
    peek = r.execute_command("SL.DECIDE", "PEEK", "0", 3, a, b, c, *g("gcra", 10),
                             *g("gcra", 3), *g("fixed_window", 10))
    assert peek[0] == 1  # b is spent: the first key that would refuse
    assert [peek[1 + 6 * i + 2] for i in range(3)] == [6, 0, 6]  # remaining after a take of 1
    assert r.execute_command("SL.RESET", a, b, c, "absent:1", "absent:2") == 3
    info = r.info("store")
    assert info["store_errors"] == 0 and info["decisions_fail_open"] == 0
    r.close()
