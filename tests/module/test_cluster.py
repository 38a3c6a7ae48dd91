"""A three-node Redis Cluster on loopback ports, the module on every node: each command
is routed by its keys' slot, and keys of several slots in one command get CROSSSLOT."""

import subprocess
import time

import pytest
import redis

from conftest import cluster_port


@pytest.fixture
def cluster(make_server):
    nodes = []
    for i in range(3):
        s = make_server("node%d" % i, start=False,
                        args=["--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                              "--cluster-node-timeout", "5000"])
        s.start(port=cluster_port())
        nodes.append(s)
    out = subprocess.run(["redis-cli", "--cluster", "create"] +
                         ["127.0.0.1:%d" % s.port for s in nodes] +
                         ["--cluster-replicas", "0", "--cluster-yes"],
                         capture_output=True, timeout=60)
    assert out.returncode == 0, out.stdout.decode() + out.stderr.decode()
    deadline = time.monotonic() + 30
    clients = [s.client() for s in nodes]
    while time.monotonic() < deadline:
        if all(c.execute_command("CLUSTER", "INFO").decode().find("cluster_state:ok") >= 0
               for c in clients):
            break
        time.sleep(0.1)
    else:
        pytest.fail("the cluster did not reach cluster_state:ok")
    yield nodes, clients
    for c in clients:
        c.close()


def _owners(nodes):
    """slot -> index of the node that serves it (CLUSTER SLOTS through the raw client:
    redis-py reshapes that reply)."""
    owner = {}
    port_of = {s.port: i for i, s in enumerate(nodes)}
    c = nodes[0].conn()
    try:
        for start, end, master, *_ in c.call("CLUSTER", "SLOTS"):
            for slot in range(start, end + 1):
                owner[slot] = port_of[master[1]]
    finally:
        c.close()
    return owner


def test_takes_in_every_slot_range(cluster):
    nodes, clients = cluster
    owner = _owners(nodes)
    assert len(owner) == 16384 and set(owner.values()) == {0, 1, 2}
    served = set()
    for i in range(300):
        key = "user:%d" % i
        slot = clients[0].execute_command("CLUSTER", "KEYSLOT", key)
        n = owner[slot]
        served.add(n)
        assert clients[n].execute_command("CL.THROTTLE", key, 1, 1, 60) == [0, 2, 1, -1, 60]
        assert clients[n].execute_command("SL.TAKE", "{%s}:x" % key, 5, 60)[1] == 1
        other = clients[(n + 1) % 3]
        with pytest.raises(redis.exceptions.ResponseError, match="MOVED %d " % slot):
            other.execute_command("CL.THROTTLE", key, 1, 1, 60)
    assert served == {0, 1, 2}


def test_multi_key_commands_need_one_slot(cluster):
    nodes, clients = cluster
    owner = _owners(nodes)
    a, b = "a", "b"
    slot_a = clients[0].execute_command("CLUSTER", "KEYSLOT", a)
    assert slot_a != clients[0].execute_command("CLUSTER", "KEYSLOT", b)
    home = clients[owner[slot_a]]
    for cmd in (["SL.TAKEMANY", 2, a, b, "LIMIT", 1, 60, "LIMIT", 1, 60], ["SL.RESET", a, b]):
        with pytest.raises(redis.exceptions.ResponseError, match="CROSSSLOT"):
            home.execute_command(*cmd)
    assert home.exists(a) == 0
    # the LIMIT arguments are not keys: one slot with hash tags is served
    ta, tb = "{user:42}:minute", "{user:42}:day"
    n = owner[clients[0].execute_command("CLUSTER", "KEYSLOT", ta)]
    out = clients[n].execute_command("SL.TAKEMANY", 2, ta, tb, "LIMIT", 10, 60, "LIMIT", 1000, 86400)
    assert out[:4] == [b"allowed", 1, b"rejected_by", -1]
    assert clients[n].execute_command("SL.RESET", ta, tb) == 2
