"""A Redis Cluster of real redis-server 7 processes (tests/lib/redis_server.py's RedisServer)
on free 127.0.0.1 ports, made by `redis-cli --cluster create`, and the tests' own model of its
hash slots. Shared by tests/backend (the cluster transport alone) and tests/integration
(sluiced on --store redis-cluster://)."""

import os
import subprocess
import sys
import time

import pytest

from redis_server import ROOT, cluster_port, module_path

# respclient (RedisServer.conn): CLUSTER SLOTS as Redis sends it, which redis-py reshapes.
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))

NODE_TIMEOUT_MS = 2000  # failure detection and failover well within a test's minute


def crc16_table():
    """CRC16-XMODEM's table (polynomial 0x1021): the test's own model of the slots."""
    table = []
    for i in range(256):
        c = i << 8
        for _ in range(8):
            c = ((c << 1) ^ 0x1021) if c & 0x8000 else (c << 1)
        table.append(c & 0xFFFF)
    return table


_TABLE = crc16_table()


def slot_of(key):
    """The cluster's slot of a str key (hash tags as the specification says)."""
    b = key.encode()
    i = b.find(b"{")
    if i >= 0:
        j = b.find(b"}", i + 1)
        if j > i + 1:
            b = b[i + 1:j]
    crc = 0
    for x in b:
        crc = ((crc << 8) & 0xFFFF) ^ _TABLE[((crc >> 8) ^ x) & 0xFF]
    return crc & 16383


class Cluster:
    """Redis Cluster nodes on loopback, made by redis-cli --cluster create."""

    def __init__(self, nodes, clients):
        self.nodes = nodes
        self.clients = clients

    def alive(self):
        return [i for i, s in enumerate(self.nodes) if s.alive()]

    def seeds(self):
        return ",".join("127.0.0.1:%d" % s.port for s in self.nodes)

    def slots(self, via=None):
        """slot -> (primary port, [replica ports]) as a live node says."""
        i = via if via is not None else self.alive()[0]
        c = self.nodes[i].conn()
        out = {}
        try:
            for start, end, primary, *replicas in c.call("CLUSTER", "SLOTS"):
                for s in range(start, end + 1):
                    out[s] = (primary[1], [r[1] for r in replicas])
        finally:
            c.close()
        return out

    def index_of(self, port):
        return next(i for i, s in enumerate(self.nodes) if s.port == port)

    def node_id(self, i):
        return self.clients[i].execute_command("CLUSTER", "MYID").decode()

    def info(self, i, section):
        """INFO section of node i, as redis-py parses it (a dict)."""
        return self.clients[i].info(section)

    def wait_ok(self, timeout=40, check=None):
        """Until every live node says cluster_state:ok (and check() holds)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if all("cluster_state:ok" in self.clients[i].execute_command(
                        "CLUSTER", "INFO").decode() for i in self.alive()) and \
                        (check is None or check()):
                    return
            except Exception:  # a node busy or loading: ask again
                pass
            time.sleep(0.1)
        pytest.fail("the cluster did not reach cluster_state:ok")


def make_cluster(make_redis, primaries=3, replicas=0, args=(), auth=None,
                 node_timeout_ms=NODE_TIMEOUT_MS, module=None):
    """A cluster of primaries * (1 + replicas) nodes, cluster_state:ok on every node and
    every replica linked to its primary. make_redis(name, start=False, args=..., module=...)
    makes a RedisServer that the caller stops; module: whether the nodes load the module
    (None: when it is built)."""
    n = primaries * (1 + replicas)
    nodes = []
    extra = ["--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
             "--cluster-node-timeout", str(node_timeout_ms)] + list(args)
    if auth:
        extra += ["--requirepass", auth, "--masterauth", auth]
    with_module = os.path.exists(module_path()) if module is None else module
    for i in range(n):
        s = make_redis("node%d" % i, start=False, args=extra, module=with_module)
        if auth:
            s.ping = _authed_ping(s, auth)
        s.start(port=cluster_port())
        nodes.append(s)
    cmd = ["redis-cli"] + (["-a", auth, "--no-auth-warning"] if auth else []) + \
        ["--cluster", "create"] + ["127.0.0.1:%d" % s.port for s in nodes] + \
        ["--cluster-replicas", str(replicas), "--cluster-yes"]
    out = subprocess.run(cmd, capture_output=True, timeout=60)
    assert out.returncode == 0, out.stdout.decode() + out.stderr.decode()
    kw = {"password": auth} if auth else {}
    cl = Cluster(nodes, [s.client(**kw) for s in nodes])

    def replicas_linked():
        # Every replica has its primary's data before a test kills a primary.
        roles = [cl.info(i, "replication") for i in range(n)]
        if any(r["role"] == "slave" and r.get("master_link_status") != "up" for r in roles):
            return False
        return sum(r["role"] == "master" for r in roles) == primaries
    cl.wait_ok(check=replicas_linked if replicas else None)
    return cl


def _authed_ping(server, password):
    import redis

    def ping():
        c = redis.Redis(host="127.0.0.1", port=server.port, password=password,
                        socket_timeout=2, socket_connect_timeout=2)
        try:
            return c.ping()
        finally:
            c.close()
    return ping
