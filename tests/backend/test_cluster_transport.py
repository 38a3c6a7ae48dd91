"""The Redis Cluster transport (src/backend/cluster.c) against a real cluster on loopback:
three primaries with a replica each (redis-cli --cluster create --cluster-replicas 1), or
three without replicas where a test needs that, driven by tests/backend/cluster_driver under
ASan + UBSan.

Each command goes to its slot's primary (every slot, checked with CLUSTER KEYSLOT and a GET
on the owner itself; the module's SL.DECIDE and EVAL too); a slot being migrated is followed
through ASK without changing the map, then through MOVED once it has moved (the map read
once, not once per reply); TRYAGAIN and CLUSTERDOWN are retried until the deadline; a
redirection loop stops after 5; a primary killed mid-flight fails what was in flight there
and nothing else, and the transport serves its slots from the promoted replica without a
restart; a primary that stops answering loses its connection; a seed that is down or silent
is passed over; close() answers everything pending; AUTH comes first; commands waiting for a
route are bounded. The driver's exit status says every command was answered exactly once.
"""

import os
import signal
import subprocess
import time

import pytest

from cluster_harness import (driver_path, free_port, make_cluster,  # noqa: F401
                             make_driver, module_path, slot_of)
from redis_harness import make_redis  # noqa: F401 (a fixture)


@pytest.fixture
def cluster(make_redis):
    return make_cluster(make_redis, primaries=3, replicas=1)


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
    # A command without a key goes to any primary.
    assert d.value("PING") == "PONG"
    st = d.state()
    assert st["ready"] is True and st["epoch"] >= 3
    d.stop()


def test_a_server_outside_cluster_mode_is_named(make_redis, make_driver):
    s = make_redis("standalone", module=False)
    d = make_driver("127.0.0.1:%d" % s.port)
    a = d.call("GET k")
    assert a.get("err") == ("no slot map from the cluster within 2000 ms (127.0.0.1:%d: ERR This "
                            "instance has cluster support disabled)" % s.port), a
    assert d.state()["ready"] is False
    # Reads of the map that fail come further and further apart (100 ms doubling to 1 s):
    # at most 8 in the 2 s the command waited, where a read every 100 ms would be 20.
    stats = s.client().info("commandstats").get("cmdstat_cluster|slots", {})
    assert 2 <= stats.get("calls", 0) <= 8, stats
    d.stop()


def test_a_seed_that_is_down_is_passed_over(cluster, make_driver):
    dead = "127.0.0.1:%d" % free_port()
    d = make_driver(dead + "," + cluster.seeds())
    assert d.value("SET seedkey 1") == "OK"
    assert d.value("GET seedkey") == "1"
    assert d.state()["ready"] is True
    d.stop()


def test_bad_seed_lists_are_refused(make_driver):
    for seeds in ("", "127.0.0.1", "127.0.0.1:0", "127.0.0.1:65536", "127.0.0.1:12x",
                  "bad host:7000", "127.0.0.1:7000,", ":7000", "a/b:7000"):
        out = subprocess.run([driver_path(), seeds], input=b"", capture_output=True, timeout=20)
        assert out.returncode == 2 and b"bad seeds" in out.stderr, (seeds, out)


def errors(cluster, i, name):
    """How many replies node i has answered with the error NAME (INFO errorstats)."""
    v = cluster.info(i, "errorstats").get("errorstat_" + name, "count=0")
    # redis-py leaves a lone "count=N" as text
    return v["count"] if isinstance(v, dict) else int(v.split("=")[1])


def slots_reads(cluster):
    """CLUSTER SLOTS calls over every live node (INFO commandstats)."""
    return sum(cluster.info(i, "commandstats").get("cmdstat_cluster|slots", {}).get("calls", 0)
               for i in cluster.alive())


def wait_until(cond, what, timeout=20):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.05)
    pytest.fail("never: " + what)


def test_a_migrating_slot_is_followed_by_ask_then_moved(cluster, make_driver):
    d = make_driver(cluster.seeds())
    key, stays, new = "mig:a", "{mig:a}:stays", "{mig:a}:new"
    s = slot_of(key)
    assert slot_of(stays) == s == slot_of(new)
    owners = cluster.slots()
    src = cluster.index_of(owners[s][0])
    dst = cluster.index_of(next(p for p, _ in owners.values() if p != owners[s][0]))
    A, B = cluster.clients[src], cluster.clients[dst]
    a_id, b_id = cluster.node_id(src), cluster.node_id(dst)
    assert d.value("SET %s 1" % key) == "OK"
    assert d.value("SET %s 2" % stays) == "OK"

    B.execute_command("CLUSTER", "SETSLOT", s, "IMPORTING", a_id)
    A.execute_command("CLUSTER", "SETSLOT", s, "MIGRATING", b_id)
    assert A.execute_command("MIGRATE", "127.0.0.1", cluster.nodes[dst].port, key, 0, 5000) \
        == b"OK"
    asks, moved_b = errors(cluster, src, "ASK"), errors(cluster, dst, "MOVED")
    assert d.value("GET %s" % key) == "1"        # A: ASK, then ASKING + GET on B
    assert d.value("SET %s 3" % new) == "OK"     # not on A: ASK, created on B
    assert d.value("GET %s" % stays) == "2"      # still A's: the map was not changed
    assert errors(cluster, src, "ASK") == asks + 2
    assert errors(cluster, dst, "MOVED") == moved_b
    c = cluster.nodes[dst].conn()
    try:
        c.call("ASKING")
        assert c.call("GET", new) == b"3"
    finally:
        c.close()

    # Keys of one slot split between the two nodes: TRYAGAIN, retried until the
    # transport's deadline, then that reply is the answer.
    tries = errors(cluster, src, "TRYAGAIN")
    a = d.call("MGET %s %s" % (key, stays))
    assert a["type"] == "error" and a["value"].startswith("TRYAGAIN"), a
    assert errors(cluster, src, "TRYAGAIN") >= tries + 3

    # The move completes: every key goes, the slot is B's on every primary.
    assert A.execute_command("MIGRATE", "127.0.0.1", cluster.nodes[dst].port, "", 0, 5000,
                             "KEYS", stays) == b"OK"
    for i in [dst, src] + [i for i in range(6) if i not in (src, dst)]:
        if cluster.info(i, "replication")["role"] == "master":
            cluster.clients[i].execute_command("CLUSTER", "SETSLOT", s, "NODE", b_id)
    reads = slots_reads(cluster)
    moved_a = errors(cluster, src, "MOVED")
    ids = d.send_many(["GET %s" % stays] * 20 + ["MGET %s %s" % (key, stays)])
    assert [d.answer(i)["value"] for i in ids] == ["2"] * 20 + [["1", "2"]]
    assert errors(cluster, src, "MOVED") >= moved_a + 1
    # Twenty MOVED replies, one read of the map.
    wait_until(lambda: slots_reads(cluster) > reads, "the map read again after MOVED")
    assert d.state()["ready"] is True
    time.sleep(0.3)  # room for any further read, which would be one too many
    assert slots_reads(cluster) == reads + 1
    # From now on the slot goes straight to B.
    moved_a = errors(cluster, src, "MOVED")
    for _ in range(3):
        assert d.value("GET %s" % key) == "1"
    assert errors(cluster, src, "MOVED") == moved_a
    d.stop()


BUSY = ('EVAL "local t0 = redis.call(\'TIME\') while true do local t = redis.call(\'TIME\') '
        'if (t[1] - t0[1]) * 1000000 + (t[2] - t0[2]) > %d then return 1 end end" 1 %s')


def keys_by_primary(owners, count=1):
    """primary port -> count keys it serves."""
    out = {}
    i = 0
    while any(len(v) < count for v in out.values()) or len(out) < 3:
        k = "p:%d" % i
        ks = out.setdefault(owners[slot_of(k)][0], [])
        if len(ks) < count:
            ks.append(k)
        i += 1
    return out


def test_a_killed_primary_fails_what_was_in_flight_and_its_replica_takes_over(
        cluster, make_driver):
    d = make_driver(cluster.seeds())
    owners = cluster.slots()
    key = "fo:key"
    primary = owners[slot_of(key)][0]
    victim = cluster.index_of(primary)
    heir = next(i for i in range(6) if cluster.info(i, "replication").get("master_port") == primary)
    assert d.value("SET %s before" % key) == "OK"
    assert cluster.clients[victim].execute_command("WAIT", 1, 5000) == 1
    others = [ks[0] for p, ks in keys_by_primary(owners).items() if p != primary]
    epoch = d.state()["epoch"]

    # In flight on the victim's connection at the kill: a script that holds the node,
    # and reads queued behind it. The other primaries' commands are not affected.
    doomed = d.send_many([BUSY % (5000000, key)] + ["GET %s" % key] * 5)
    fine = d.send_many(["SET %s x" % k for k in others])
    assert [d.answer(i)["value"] for i in fine] == ["OK"] * len(others)
    time.sleep(0.5)
    assert all(i not in d.answers for i in doomed)
    os.kill(cluster.nodes[victim].proc.pid, signal.SIGKILL)
    cluster.nodes[victim].proc.wait(timeout=10)
    for i in doomed:
        a = d.answer(i)
        assert "err" in a and "lost" in a["err"], a

    cluster.wait_ok(check=lambda: cluster.info(heir, "replication")["role"] == "master")
    # The same driver, not restarted, serves the slot from the promoted replica (commands
    # sent while the map still names the dead primary may fail, and are not retried).
    deadline = time.monotonic() + 30
    while True:
        a = d.call("GET %s" % key)
        if a.get("value") == "before":
            break
        assert "err" in a, a
        assert time.monotonic() < deadline, a
        time.sleep(0.1)
    assert cluster.slots()[slot_of(key)][0] == cluster.nodes[heir].port
    ids = d.send_many(["SET %s after" % k for k in one_key_per_slot()[::64]])
    assert all(d.answer(i).get("value") == "OK" for i in ids)
    st = d.state()
    assert st["ready"] is True and st["epoch"] > epoch
    d.stop()


def test_close_answers_everything_pending(cluster, make_driver):
    # Before the map is known: every command waits, and close() answers them.
    d = make_driver(cluster.seeds())
    d.write(["INCR early:%d" % i for i in range(50)] + ["#close"])
    d.next_id = 50
    d.stop()
    assert sorted(d.answers) == list(range(1, 51))
    assert [a for a in d.answers.values()
            if a.get("err") != "transport closing" and a.get("value") != 1] == []

    # Connected, with a script holding one primary: what is in flight is answered too.
    d = make_driver(cluster.seeds())
    assert d.value("SET close:k 1") == "OK"
    ids = d.send_many([BUSY % (1000000, "close:k")] +
                      ["INCR close:%d" % i for i in range(200)])
    time.sleep(0.2)
    d.stop(close_first=True)
    assert sorted(d.answers) == list(range(1, 203))
    assert d.answers[ids[0]] == {"id": ids[0], "err": "transport closing"}
    assert [d.answers[i] for i in ids[1:]
            if d.answers[i].get("err") != "transport closing"
            and d.answers[i].get("value") != 1] == []


def test_close_from_within_a_cb(cluster, make_driver):
    # The first answer closes the transport: the rest, in flight on its connection and
    # on the others, are answered once each, as they come or as "transport closing".
    d = make_driver(cluster.seeds())
    assert d.value("SET cb:k 1") == "OK"
    d.write(["#close-on 2"])
    ids = d.send_many(["INCR cb:%d" % i for i in range(300)])
    d.stop()
    assert sorted(d.answers) == [1] + ids
    closing = [i for i in ids if d.answers[i].get("err") == "transport closing"]
    assert [d.answers[i] for i in ids if i not in closing and d.answers[i].get("value") != 1] \
        == []
    assert closing, "nothing was pending at the close"


def test_auth_comes_first(make_redis, make_driver):
    cluster = make_cluster(make_redis, primaries=3, replicas=0, auth="s3cret pass")
    d = make_driver(cluster.seeds(), ["--password", "s3cret pass"])
    ids = d.send_many(["SET auth:%d %d" % (i, i) for i in range(100)])
    assert all(d.answer(i)["value"] == "OK" for i in ids)
    d.stop()
    d = make_driver(cluster.seeds(), ["--user", "default", "--password", "s3cret pass"])
    assert d.value("GET auth:7") == "7"
    d.stop()
    d = make_driver(cluster.seeds(), ["--password", "wrong"])
    a = d.call("GET auth:7")
    assert "err" in a and "AUTH" in a["err"] and "WRONGPASS" in a["err"], a
    d.stop()
    d = make_driver(cluster.seeds())
    a = d.call("GET auth:7")
    assert "err" in a or a["value"].startswith("NOAUTH"), a
    d.stop()


def test_module_commands_and_scripts_go_to_their_keys_primary(cluster, make_driver):
    assert os.path.exists(module_path()), "the module is not built: run make"
    d = make_driver(cluster.seeds())
    owners = cluster.slots()
    keys = [ks[0] for ks in keys_by_primary(owners).values()]
    for k in keys:
        take = "SL.DECIDE TAKE 0 1 %s cell 1 1 60 1 0 0 0" % k
        got = [d.value(take) for _ in range(3)]
        assert [g[0] for g in got] == [-1, -1, 0]   # max_burst 1: two allowed, then refused
        assert [g[1] for g in got] == [1, 1, 0]
        owner = cluster.index_of(owners[slot_of(k)][0])
        assert cluster.clients[owner].exists(k) == 1
        script = ('EVAL "return redis.call(\'INCRBY\', KEYS[1], ARGV[1])" 1 %s:n 5'
                  % ("{%s}" % k))
        assert d.value(script) == 5
        assert cluster.clients[owner].get("{%s}:n" % k) == b"5"
    # Several keys of one slot in one decision, all or nothing.
    got = d.value("SL.DECIDE TAKE 0 2 {u}:a {u}:b cell 1 1 60 1 0 0 0 "
                  "gcra 10 60000000000 10 1 0 0 0")
    assert got[0] == -1 and got[1] == 1 and got[7] == 1
    d.stop()


def test_a_seed_that_never_answers_is_given_up(cluster, make_driver):
    import socket
    with socket.socket() as hung:
        hung.bind(("127.0.0.1", 0))
        hung.listen(16)  # connections complete in the kernel; nothing is ever read
        seeds = "127.0.0.1:%d,%s" % (hung.getsockname()[1], cluster.seeds())
        d = make_driver(seeds, ["--connect-timeout-ms", "300"])
        assert d.value("SET hung:k 1") == "OK"
        assert d.state()["ready"] is True
        d.stop()


def test_a_primary_that_stops_answering_loses_its_connection(make_redis, make_driver):
    # A long node timeout: a node busy with a script for 3 s is not failed over.
    cluster = make_cluster(make_redis, primaries=3, replicas=0, node_timeout_ms=15000)
    d = make_driver(cluster.seeds())
    owners = cluster.slots()
    key = "slow:k"
    assert d.value("SET %s 1" % key) == "OK"
    others = [ks[0] for p, ks in keys_by_primary(owners).items()
              if p != owners[slot_of(key)][0]]
    epoch = d.state()["epoch"]
    stuck = d.send_many([BUSY % (3000000, key), "GET %s" % key])
    for i in stuck:
        a = d.answer(i)
        assert "err" in a and "no reply within 2000 ms" in a["err"], a
    assert [d.value("GET %s" % k) for k in others] == [None] * len(others)
    # A new connection, answered once the script is over.
    assert d.value("GET %s" % key) == "1"
    assert d.state()["epoch"] > epoch
    d.stop()


def test_a_cluster_down_is_retried_then_answered_and_a_restarted_primary_serves_again(
        make_redis, make_driver):
    cluster = make_cluster(make_redis, primaries=3, replicas=0)
    d = make_driver(cluster.seeds())
    owners = cluster.slots()
    by_primary = keys_by_primary(owners)
    victim_port = owners[slot_of("down:k")][0]
    victim = cluster.index_of(victim_port)
    alive_key = next(ks[0] for p, ks in by_primary.items() if p != victim_port)
    alive = cluster.index_of(owners[slot_of(alive_key)][0])
    assert d.value("SET %s 1" % alive_key) == "OK"
    os.kill(cluster.nodes[victim].proc.pid, signal.SIGKILL)
    cluster.nodes[victim].proc.wait(timeout=10)
    # Without a replica to promote, the cluster fails once the node is seen down, and its
    # other primaries answer CLUSTERDOWN: retried until the deadline, then the answer.
    wait_until(lambda: "cluster_state:fail" in cluster.clients[alive].execute_command(
        "CLUSTER", "INFO").decode(), "cluster_state:fail", timeout=30)
    downs = errors(cluster, alive, "CLUSTERDOWN")
    a = d.call("GET %s" % alive_key)
    assert a["type"] == "error" and a["value"].startswith("CLUSTERDOWN"), a
    assert errors(cluster, alive, "CLUSTERDOWN") >= downs + 3
    # The node comes back on its port with its nodes.conf; the same driver serves its
    # slots again over a new connection.
    cluster.nodes[victim].start(port=victim_port)
    cluster.wait_ok()
    deadline = time.monotonic() + 30
    while True:
        a = d.call("SET down:k 2")
        if a.get("value") == "OK":
            break
        assert time.monotonic() < deadline, a
        time.sleep(0.1)
    assert cluster.clients[victim].get("down:k") == b"2"
    assert d.value("GET %s" % alive_key) == "1"
    d.stop()


def test_redirections_are_bounded(cluster, make_driver):
    d = make_driver(cluster.seeds())
    key = "loop:k"
    s = slot_of(key)
    owners = cluster.slots()
    a = cluster.index_of(owners[s][0])
    b = cluster.index_of(next(p for p, _ in owners.values() if p != owners[s][0]))
    assert d.value("GET %s" % key) is None
    # A gives the (empty) slot to B, and B still believes it A's: each sends the other.
    cluster.clients[a].execute_command("CLUSTER", "SETSLOT", s, "NODE", cluster.node_id(b))
    moved = errors(cluster, a, "MOVED") + errors(cluster, b, "MOVED")
    got = d.call("GET %s" % key)
    assert got.get("err", "").startswith("too many cluster redirections (more than 5), the last: "
                                         "MOVED %d 127.0.0.1:" % s), got
    assert errors(cluster, a, "MOVED") + errors(cluster, b, "MOVED") == moved + 6
    d.stop()


def test_commands_waiting_for_a_route_are_bounded(make_driver):
    # Nothing answers: every command waits for a map, up to SL_CLUSTER_MAX_WAITING of them.
    d = make_driver("127.0.0.1:%d" % free_port())
    cap, extra = 65536, 1000
    ids = d.send_many(["GET w:%d" % i for i in range(cap + extra)])
    refused = [i for i in ids if d.answer(i).get("err") == "send refused"]
    # All sent within the 2 s the first ones wait: the extra ones are refused.
    assert refused == ids[cap:]
    assert all(d.answers[i]["err"].startswith("no slot map from the cluster within 2000 ms (127.0.0.1:")
               for i in ids[:cap])
    d.stop()


def test_nodes_of_unknown_endpoint_are_reached_where_the_map_was_read(make_redis, make_driver):
    # cluster-preferred-endpoint-type unknown-endpoint: CLUSTER SLOTS names no host (a
    # null) and MOVED says ":PORT": both mean the host the transport asked.
    cluster = make_cluster(make_redis, primaries=3, replicas=0,
                           args=["--cluster-preferred-endpoint-type", "unknown-endpoint"])
    c = cluster.nodes[0].conn()
    try:
        assert all(r[2][0] is None for r in c.call("CLUSTER", "SLOTS"))
    finally:
        c.close()
    d = make_driver(cluster.seeds())
    ids = d.send_many(["SET u:%d %d" % (i, i) for i in range(200)])
    assert all(d.answer(i).get("value") == "OK" for i in ids)
    # An empty slot moved from A to B: A answers "MOVED s :PORT_B".
    key = "u:moving"
    s = slot_of(key)
    owners = cluster.slots()
    a = cluster.index_of(owners[s][0])
    b = cluster.index_of(next(p for p, _ in owners.values() if p != owners[s][0]))
    assert cluster.clients[a].execute_command("CLUSTER", "COUNTKEYSINSLOT", s) == 0
    for i in (b, a) + tuple(i for i in range(3) if i not in (a, b)):
        cluster.clients[i].execute_command("CLUSTER", "SETSLOT", s, "NODE", cluster.node_id(b))
    moved = errors(cluster, a, "MOVED")
    assert d.value("SET %s 1" % key) == "OK"
    assert errors(cluster, a, "MOVED") == moved + 1
    assert cluster.clients[b].get(key) == b"1"
    d.stop()
