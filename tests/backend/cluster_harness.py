"""The harness for the cluster transport's tests (src/backend/cluster.c): a Redis Cluster
of real redis-server 7 processes (Debian's) on free 127.0.0.1 ports, made by `redis-cli
--cluster create`, and tests/backend/cluster_driver (the transport on a libuv loop, built
under ASan + UBSan in build/asan) fed commands on its stdin, answering one JSON line each.

The nodes are tests/lib's RedisServer processes (one working directory each, stopped by PID),
made by redis_harness's make_redis fixture; the module is loaded into them when it is built.
Like redis_harness, this is no conftest: a test file imports the fixtures it uses. The driver:
$CLUSTER_DRIVER, else build/asan/tests/cluster_driver. Run: make test-backend, or
/usr/bin/python3 -B -m pytest -q -p no:cacheprovider tests/backend/test_cluster_transport.py
"""

import json
import os
import queue
import subprocess
import sys
import threading
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "lib"))
from harness import SANITIZER_MARKS, free_port  # noqa: E402,F401
from redis_server import cluster_port, module_path  # noqa: E402

NODE_TIMEOUT_MS = 2000  # failure detection and failover well within a test's minute


def driver_path():
    p = os.environ.get("CLUSTER_DRIVER", "build/asan/tests/cluster_driver")
    p = p if os.path.isabs(p) else os.path.join(ROOT, p)
    if not os.access(p, os.X_OK):
        pytest.fail("the driver is not built: %s (cmake --build build/asan --target "
                    "cluster_driver)" % p)
    return p


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
                 node_timeout_ms=NODE_TIMEOUT_MS):
    """A cluster of primaries * (1 + replicas) nodes, cluster_state:ok on every node and
    every replica linked to its primary; the module loaded when it is built."""
    n = primaries * (1 + replicas)
    nodes = []
    extra = ["--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
             "--cluster-node-timeout", str(node_timeout_ms)] + list(args)
    if auth:
        extra += ["--requirepass", auth, "--masterauth", auth]
    with_module = os.path.exists(module_path())
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


class Driver:
    """One cluster_driver process: send(line) returns the command's id; answer(id)
    waits for its JSON answer. stop() ends stdin and asserts a clean exit: status 0
    (every command answered, none twice), no sanitizer report."""

    def __init__(self, seeds, args=()):
        self.argv = [driver_path()] + list(args) + [seeds]
        env = dict(os.environ, ASAN_OPTIONS="detect_leaks=1",
                   UBSAN_OPTIONS="print_stacktrace=1")
        self.proc = subprocess.Popen(self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, env=env)
        self.next_id = 0
        self.answers = {}
        self.stats = queue.Queue()
        self.duplicates = []
        self.cond = threading.Condition()
        self.stderr = b""
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        self.err_reader = threading.Thread(target=self._read_err, daemon=True)
        self.err_reader.start()

    def _read(self):
        for raw in self.proc.stdout:
            msg = json.loads(raw)
            with self.cond:
                if "id" in msg:
                    if msg["id"] in self.answers:
                        self.duplicates.append(msg)
                    self.answers[msg["id"]] = msg
                else:
                    self.stats.put(msg)
                self.cond.notify_all()

    def _read_err(self):
        self.stderr = self.proc.stderr.read()

    def write(self, lines):
        self.proc.stdin.write("".join(l + "\n" for l in lines).encode())
        self.proc.stdin.flush()

    def send_many(self, lines):
        """Sends every line in one write; returns their ids."""
        first = self.next_id + 1
        self.next_id += len(lines)
        self.write(lines)
        return list(range(first, self.next_id + 1))

    def send(self, line):
        return self.send_many([line])[0]

    def answer(self, cid, timeout=20):
        deadline = time.monotonic() + timeout
        with self.cond:
            while cid not in self.answers:
                left = deadline - time.monotonic()
                if left <= 0 or self.proc.poll() is not None:
                    pytest.fail("no answer to command %d; driver stderr:\n%s"
                                % (cid, self.stderr.decode(errors="replace")))
                self.cond.wait(min(left, 0.5))
            return self.answers[cid]

    def call(self, line, timeout=20):
        return self.answer(self.send(line), timeout)

    def value(self, line):
        """The reply's value; fails the test on a transport error or an error reply."""
        a = self.call(line)
        assert "err" not in a and a["type"] != "error", (line, a)
        return a["value"]

    def state(self):
        self.write(["#stats"])
        return self.stats.get(timeout=20)

    def stop(self, close_first=False):
        if close_first:
            self.write(["#close"])
        self.proc.stdin.close()
        try:
            rc = self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            pytest.fail("the driver did not exit at the end of its input")
        self.reader.join(10)
        self.err_reader.join(10)
        err = self.stderr.decode(errors="replace")
        assert rc == 0, "driver exit status %s; stderr:\n%s" % (rc, err)
        assert not any(m in err for m in SANITIZER_MARKS), err
        assert not self.duplicates, self.duplicates
        return rc


@pytest.fixture
def make_driver():
    started = []

    def make(seeds, args=()):
        d = Driver(seeds, args)
        started.append(d)
        return d

    yield make
    for d in started:
        if d.proc.poll() is None:
            d.proc.kill()
            d.proc.wait()
