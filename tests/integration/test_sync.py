"""The sync strategy (--store sync+redis://): three real sluiced decide on their own
leases of each limit and trade them with one real redis-server every 100 ms, through
sluice-redis.so's SL.SYNC ("module") or the Lua script's SYNC ("script").

The issue's targets, each printed as figures and asserted as a bound:
  - steady overload at 10x the limit split 60/30/10: the fleet admits within 2% of what
    one exact limiter (a fourth sluiced on memory://, sent the same requests) admits;
  - all traffic moving from one node to another: the new node admits at least 90% of
    the limit from two intervals after the move;
  - a burst from idle over every node: within the stated bound (quota.h);
and the promises around them: a restarted node starts from the fleet's state, a node
cut off from the store goes on at its last share and says so in /metrics, and
`sluice simulate --strategy sync` predicts the real fleet's total within 2%.

SLUICE_SYNC_SECONDS sets the steady run's length (default 60, the issue's).
"""

import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

import pytest

from conftest import Sluiced
from harness import binary, free_port, sigstop

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from redis_cluster import make_cluster, slot_of  # noqa: E402
from redis_server import RedisServer  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "backend"))
from redis_harness import make_redis  # noqa: E402,F401 (a fixture)

INTERVAL_MS = 100
LIMIT = 100          # per second
SECONDS = float(os.environ.get("SLUICE_SYNC_SECONDS", "60"))
LEASED = ["gcra", "token_bucket", "leaky_bucket"]


@pytest.fixture(params=["module", "script"])
def engine(request):
    return request.param


@pytest.fixture
def central(engine, tmp_path):
    s = RedisServer(str(tmp_path / "redis"), module=(engine == "module")).start()
    yield s
    if s.proc and s.proc.poll() is None:
        try:
            os.kill(s.proc.pid, signal.SIGCONT)
        except ProcessLookupError:
            pass
    s.stop()


def sync_url(redis, node, nodes=3, extra=""):
    return "sync+redis://127.0.0.1:%d?node=%d&nodes=%d&interval_ms=%d%s" % (
        redis.port, node, nodes, INTERVAL_MS, extra)


def start(tmp_path, store, name, extra=(), port=None, http=False):
    # A trade's budget no trade misses on a loaded machine (ASan, two cores): a first
    # check that gave up waiting would be decided on the static share.
    args = ["--store", store, "--threads", "2", "--store-timeout-ms", "1000"] + list(extra)
    s = Sluiced(args=args, workdir=str(tmp_path / name))
    os.makedirs(s.workdir, exist_ok=True)
    if http:
        s.http_port = free_port()
        s.extra += ["--http-port", str(s.http_port)]
    s.start(port)
    return s


@pytest.fixture
def fleet(central, tmp_path):
    nodes = [start(tmp_path, sync_url(central, i), "s%d" % i, http=True) for i in range(3)]
    exact = start(tmp_path, "memory://", "exact")
    yield central, nodes, exact
    for n in nodes + [exact]:
        if n.alive():
            n.stop()


def metrics(node):
    with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % node.http_port,
                                timeout=10) as r:
        text = r.read().decode()
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            out[name] = float(value)
    return out


class Balancer:
    """The simulator's smooth weighted round-robin (src/cli/fleet.c), so that the real
    fleet and `sluice simulate --node-weights` see each request on the same node."""

    def __init__(self, weights):
        self.weights = list(weights)
        self.total = sum(weights)
        self.credit = [0] * len(weights)

    def pick(self):
        best = 0
        for k, w in enumerate(self.weights):
            self.credit[k] += w
            if self.credit[k] > self.credit[best]:
                best = k
        self.credit[best] -= self.total
        return best


class Load:
    """Paced traffic: `rate` takes a second of each key, spread over nodes by the
    balancer (or by route(t) -> node), each also sent to the exact limiter. Counts the
    admitted per key, per node, and per 100 ms bucket."""

    def __init__(self, nodes, exact, keys, rate, weights=(1, 1, 1), burst=LIMIT):
        self.nodes, self.exact, self.keys, self.rate = nodes, exact, keys, rate
        self.burst = burst
        self.clients = [n.redis() for n in nodes]
        self.ref = exact.redis() if exact else None
        self.balancer = Balancer(weights)
        self.route = None
        self.admitted = {k: [0] * len(nodes) for k in keys}
        self.exact_admitted = {k: 0 for k in keys}
        self.buckets = {}  # (key, node, bucket) -> admitted
        self.trace = []    # (t, node) of the first key's requests
        self.sent = 0
        self.errors = []

    def cmd(self, key):
        alg = key.split(":")[1]
        return ("SL.TAKE", key, LIMIT, "1s", "BURST", self.burst, "ALGORITHM", alg)

    def run(self, seconds, t0=None):
        t0 = t0 or time.monotonic()
        start_sent = self.sent
        while True:
            now = time.monotonic()
            t = now - t0
            if t >= seconds:
                break
            due = int(t * self.rate) - (self.sent - start_sent)
            if due <= 0:
                time.sleep(0.002)
                continue
            pipes = [c.pipeline(transaction=False) for c in self.clients]
            ref = self.ref.pipeline(transaction=False) if self.ref else None
            sent = []  # (key, node)
            for _ in range(min(due, 200)):
                node = self.route(t) if self.route else self.balancer.pick()
                for key in self.keys:
                    pipes[node].execute_command(*self.cmd(key))
                    if ref:
                        ref.execute_command(*self.cmd(key))
                    sent.append((key, node))
                self.trace.append((now, node))
                self.sent += 1
            replies = [p.execute(raise_on_error=False) for p in pipes]
            ref_replies = ref.execute(raise_on_error=False) if ref else []
            at = [0] * len(self.nodes)
            bucket = int(t * 10)
            for i, (key, node) in enumerate(sent):
                reply = replies[node][at[node]]
                at[node] += 1
                if isinstance(reply, Exception):
                    self.errors.append(str(reply))
                    continue
                if reply[1]:
                    self.admitted[key][node] += 1
                    b = (key, node, bucket)
                    self.buckets[b] = self.buckets.get(b, 0) + 1
                if ref:
                    rr = ref_replies[i]
                    if not isinstance(rr, Exception) and rr[1]:
                        self.exact_admitted[key] += 1
        return t0

    def close(self):
        for c in self.clients + ([self.ref] if self.ref else []):
            c.close()


def stated_excess(burst, rate, interval_s, n):
    """quota.h's bound beyond B + r*L: 3*r*I + (N-1)/N * (B + r*I) + N, rounded up."""
    ri = rate * interval_s
    return int(3 * ri + (n - 1) / n * (burst + ri) + n + 0.999999)


def test_steady_overload_split_60_30_10_admits_what_one_exact_limiter_does(fleet, engine,
                                                                             tmp_path):
    redis, nodes, exact = fleet
    seconds = SECONDS if engine == "module" else min(SECONDS, 20)
    keys = ["steady:%s" % a for a in LEASED]
    load = Load(nodes, exact, keys, rate=10 * LIMIT, weights=(6, 3, 1))
    load.run(seconds)
    load.close()
    assert not load.errors, load.errors[:3]
    for key in keys:
        fleet_total = sum(load.admitted[key])
        want = load.exact_admitted[key]
        print("%s over %.0f s at 10x, 60/30/10: fleet %d (%s by node), one exact limiter %d: "
              "%+.2f%%" % (key, seconds, fleet_total, load.admitted[key], want,
                           100.0 * (fleet_total - want) / want))
        assert abs(fleet_total - want) <= 0.02 * want
    # The simulator on the same trace (the first key's times and nodes).
    trace = tmp_path / "trace.txt"
    t0 = load.trace[0][0]
    trace.write_text("".join("%.6f\n" % (t - t0) for t, _ in load.trace))
    out = subprocess.run(
        [binary("SLUICE", "sluice"), "simulate", "--limit", str(LIMIT), "--period", "1s",
         "--traffic", str(trace), "--nodes", "3", "--strategy", "sync", "--sync-interval",
         "%dms" % INTERVAL_MS, "--node-weights", "6,3,1", "--algorithms", "gcra"],
        capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    row = [l for l in out.stdout.splitlines() if l.split() and l.split()[0] == "sync"]
    assert row, out.stdout
    predicted = int(row[0].split()[1])
    real = sum(load.admitted[keys[0]])
    print("simulate --strategy sync on the same trace: %d admitted, the real fleet %d: %+.2f%%"
          % (predicted, real, 100.0 * (predicted - real) / real))
    assert abs(predicted - real) <= 0.02 * real


def test_traffic_moving_to_another_node_is_followed_within_two_intervals(fleet, engine):
    if engine == "script":
        pytest.skip("the same rules as the module's (tests/module/test_lua_sync.py)")
    _, nodes, exact = fleet
    keys = ["move:%s" % a for a in LEASED]
    load = Load(nodes, None, keys, rate=10 * LIMIT)
    load.route = lambda t: 0 if t < 3.0 else 1
    load.run(5.0)
    load.close()
    assert not load.errors, load.errors[:3]
    for key in keys:
        # Node 1's admissions from two intervals after the move, over one second.
        got = sum(load.buckets.get((key, 1, b), 0) for b in range(32, 42))
        print("%s: node 1 admits %d in the second from two intervals after the move (limit %d)"
              % (key, got, LIMIT))
        assert got >= 0.9 * LIMIT


def test_a_burst_from_idle_stays_within_the_stated_bound(fleet, engine):
    _, nodes, _ = fleet
    burst = 100
    bound = burst + stated_excess(burst, LIMIT, INTERVAL_MS / 1000.0, 3)
    for alg in LEASED:
        key = "idle:%s" % alg
        admitted = [0, 0, 0]
        go = threading.Event()

        def fire(k):
            c = nodes[k].redis()
            go.wait()
            p = c.pipeline(transaction=False)
            for _ in range(300):
                p.execute_command("SL.TAKE", key, LIMIT, "1s", "BURST", burst, "ALGORITHM", alg)
            admitted[k] = sum(1 for r in p.execute() if r[1])
            c.close()

        threads = [threading.Thread(target=fire, args=(k,)) for k in range(3)]
        t0 = time.monotonic()
        for t in threads:
            t.start()
        go.set()
        for t in threads:
            t.join()
        first = time.monotonic() - t0
        # The flood goes on for a second at 10 times the limit over the three nodes.
        load = Load(nodes, None, [key], rate=10 * LIMIT, burst=burst)
        load.cmd = lambda k: ("SL.TAKE", k, LIMIT, "1s", "BURST", burst, "ALGORITHM", alg)
        load.run(1.0)
        load.close()
        span = time.monotonic() - t0
        total = sum(admitted) + sum(load.admitted[key])
        print("%s: 900 at once from idle over 3 nodes admitted %d %s in %.3f s (its leases "
              "from the first trades); with a second of 10x after, %d in %.2f s: one exact "
              "limiter %d + %.0f, the stated bound %d + %.0f"
              % (alg, sum(admitted), admitted, first, total, span, burst, LIMIT * span, bound,
                 LIMIT * span))
        assert total <= bound + LIMIT * span
        # Each node's first trade of a new key leases it the static share kept for it
        # (B/N): the whole burst, but for rounding, even before any interval ends.
        assert sum(admitted) >= burst - 3
        # Under the flood the rest is leased out: about what one exact limiter admits.
        assert total >= 0.9 * (burst + LIMIT * (span - 2 * INTERVAL_MS / 1000.0))


def test_a_restarted_node_starts_from_the_fleet_state(fleet, engine, tmp_path):
    if engine == "script":
        pytest.skip("the node's half is the same with either central")
    redis, nodes, exact = fleet
    burst = 300  # a fresh start would be B/N = 100 at once
    keys = ["restart:gcra"]
    load = Load(nodes, None, keys, rate=10 * LIMIT, burst=burst)
    load.run(2.0)
    port = nodes[0].port
    nodes[0].kill()
    load.clients[0].close()
    nodes[0] = start(tmp_path, sync_url(redis, 0), "s0-again", port=port, http=True)
    load.nodes = nodes
    load.clients[0] = nodes[0].redis()
    before = load.admitted[keys[0]][0]
    load.buckets = {}
    load.run(1.0)
    load.close()
    first = load.buckets.get((keys[0], 0, 0), 0) + load.buckets.get((keys[0], 0, 1), 0)
    print("restart: node 0 admits %d in its first 200 ms back (a fresh share would be %d at "
          "once), %d in its first second" % (first, burst // 3,
                                             load.admitted[keys[0]][0] - before))
    assert first <= 0.3 * burst // 3


def test_a_node_cut_off_from_the_store_goes_on_at_its_last_share(fleet, engine):
    if engine == "script":
        pytest.skip("the node's half is the same with either central")
    redis, nodes, _ = fleet
    keys = ["cut:gcra"]
    load = Load(nodes, None, keys, rate=10 * LIMIT, weights=(6, 3, 1))
    load.run(2.0)
    assert all(metrics(n)["sluice_sync_central_up"] == 1 for n in nodes)
    sigstop(redis.proc.pid)
    try:
        before = list(load.admitted[keys[0]])
        load.run(3.0)
        during = [a - b for a, b in zip(load.admitted[keys[0]], before)]
        m = [metrics(n) for n in nodes]
    finally:
        os.kill(redis.proc.pid, signal.SIGCONT)
    print("store stopped 3 s: admitted %s by node (limit %d a second), unleased takes %s"
          % (during, LIMIT, [x["sluice_sync_unleased_takes_total"] for x in m]))
    assert all(x["sluice_sync_central_up"] == 0 for x in m)
    assert all(x["sluice_sync_unleased_takes_total"] > 0 for x in m)
    # Its last share: node 0 had 60% of the traffic, and keeps about 60% of the rate
    # (the static share would be a third); the fleet stays near the limit.
    assert during[0] >= 0.45 * LIMIT * 3
    assert sum(during) <= LIMIT * 3 * 1.1 + LIMIT
    deadline = time.monotonic() + 10
    load.run(1.0)
    while time.monotonic() < deadline and not all(
            metrics(n)["sluice_sync_central_up"] == 1 for n in nodes):
        load.run(0.2)
    load.close()
    assert all(metrics(n)["sluice_sync_central_up"] == 1 for n in nodes)


def test_windows_pass_through_to_the_store_and_stay_exact(fleet):
    _, nodes, _ = fleet
    clients = [n.redis() for n in nodes]
    for alg in ["fixed_window", "sliding_window", "sliding_log"]:
        allowed = sum(clients[i % 3].execute_command("SL.TAKE", "win:" + alg, 10, "1h",
                                                     "ALGORITHM", alg)[1] for i in range(30))
        assert allowed == 10, alg
    for c in clients:
        c.close()


def test_a_key_holding_something_else_in_redis_is_wrongtype(fleet):
    redis, nodes, _ = fleet
    r = redis.client()
    r.set("taken:by:app", "hello")
    c = nodes[0].redis()
    with pytest.raises(Exception) as e:
        c.execute_command("SL.TAKE", "taken:by:app", 10, "1s")
    assert "WRONGTYPE" in str(e.value)
    assert r.get("taken:by:app") == b"hello"
    c.close()


def test_info_says_what_the_node_is(fleet):
    _, nodes, _ = fleet
    c = nodes[1].redis()
    c.execute_command("SL.TAKE", "info:k", 10, "1s")
    info = c.info("sync")
    assert info["sync_node"] == 1 and info["sync_nodes"] == 3
    assert info["sync_interval_ms"] == INTERVAL_MS
    assert info["sync_central"] == "up" and info["sync_keys"] >= 1
    c.close()


@pytest.mark.parametrize("query,why", [
    ("?nodes=3", "give both node=I and nodes=N"),
    ("?node=0", "give both node=I and nodes=N"),
    ("?node=3&nodes=3", "node must be below nodes"),
    ("?node=0&nodes=17", "nodes must be an integer from 1 to 16"),
    ("?node=0&nodes=3&interval_ms=0", "interval_ms must be an integer from 1 to 60000"),
    ("?node=0&nodes=3&interval_ms=x", "interval_ms"),
])
def test_a_bad_sync_url_is_refused_at_start_saying_why(query, why):
    argv = [binary("SLUICED", "sluiced"), "--port", str(free_port()), "--store",
            "sync+redis://127.0.0.1:1" + query]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    assert proc.returncode != 0
    assert why in proc.stderr, proc.stderr


def test_sync_over_a_redis_cluster_keeps_each_record_on_its_slots_primary(make_redis, tmp_path,
                                                                          engine):
    """sync+redis-cluster://: each key's record lives on its slot's primary, and three
    nodes share each key's burst there."""
    cluster = make_cluster(make_redis, primaries=3, replicas=0, module=(engine == "module"))
    url = "sync+redis-cluster://%s?node=%%d&nodes=3&interval_ms=%d" % (cluster.seeds(),
                                                                       INTERVAL_MS)
    nodes = [start(tmp_path, url % i, "c%d" % i) for i in range(3)]
    try:
        clients = [n.redis() for n in nodes]
        # Every worker connected to every primary first (each learns the slots by
        # itself): a trade that waits for that is late for a key's first interval.
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and any(
                c.info("store")["store_state"] != "up" for c in clients):
            time.sleep(0.05)
        owners = cluster.slots()
        keys = ["ck:%d" % i for i in range(12)]
        for k in keys:
            got = sum(clients[i % 3].execute_command("SL.TAKE", k, 9, "1h")[1]
                      for i in range(30))
            # Each node's first trade of a new key leases it its third of the burst: 9.
            # On a machine slow enough, a trade late for the key's first interval gets
            # its share of what is free instead (fewer), and a node that saw a trade
            # fail decides its first takes on the static share (more): within the bound.
            assert 6 <= got <= 9 + stated_excess(9, 9 / 3600.0, INTERVAL_MS / 1000.0, 3), \
                (k, got)
            owner = cluster.index_of(owners[slot_of(k)][0])
            assert cluster.clients[owner].exists(k) == 1, k
        info = clients[0].info("sync")
        assert info["sync_failures"] == 0 and info["sync_central"] == "up", info
        for c in clients:
            c.close()
    finally:
        for n in nodes:
            n.stop()


def test_a_node_at_max_keys_refuses_a_new_key_saying_which_limit(tmp_path):
    redis = RedisServer(str(tmp_path / "redis")).start()
    node = start(tmp_path, sync_url(redis, 0, nodes=1, extra="&max_keys=2"), "full", http=True)
    try:
        c = node.redis()
        for k in ["a", "b"]:
            assert c.execute_command("SL.TAKE", k, 10, "1s")[1] == 1
        with pytest.raises(Exception) as e:
            c.execute_command("SL.TAKE", "c", 10, "1s")
        assert "max_keys (2)" in str(e.value), str(e.value)
        with pytest.raises(urllib.error.HTTPError) as h:
            urllib.request.urlopen("http://127.0.0.1:%d/v1/check?key=d&limit=5&period=1s"
                                   % node.http_port, timeout=10)
        assert h.value.code == 503
        assert "max_keys (2)" in h.value.read().decode()
        # The keys it holds go on being answered.
        assert c.execute_command("SL.TAKE", "a", 10, "1s")[1] == 1
        c.close()
    finally:
        node.stop()
        redis.stop()


def test_nodes_without_ids_claim_them_in_redis(central, tmp_path):
    """sync+redis:// without node= and nodes=: each node claims the lowest free id in the
    fleet's registry, renews it every second, and learns the fleet's size; a node that
    stops renewing frees its id within 5 s, for the next node that starts."""
    url = "sync+redis://127.0.0.1:%d?interval_ms=%d" % (central.port, INTERVAL_MS)
    nodes = [start(tmp_path, url, "auto%d" % i) for i in range(3)]
    try:
        def ids():
            out = []
            for n in nodes:
                c = n.redis()
                info = c.info("sync")
                c.close()
                out.append((info["sync_node"], info["sync_nodes"]))
            return out

        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and any(n != 3 for _, n in ids()):
            time.sleep(0.1)
        got = ids()
        assert sorted(i for i, _ in got) == [0, 1, 2] and all(n == 3 for _, n in got), got
        # One limit across the three: a burst of 9 admits 9, each node its share of 3 once
        # its first trade is in; a node whose trade is late on a loaded machine decides on
        # what it holds, and may admit less. At most the stated bound's B + N (the unit
        # each node may carry across a sync; the refill of 9 an hour adds none here).
        clients = [n.redis() for n in nodes]
        allowed = sum(clients[i % 3].execute_command("SL.TAKE", "auto:burst", 9, "1h")[1]
                      for i in range(30))
        assert 6 <= allowed <= 9 + 3, allowed
        for c in clients:
            c.close()
        gone = got[1][0]
        nodes[1].kill()
        r = central.client()

        def held(i):
            """Is id i held in the registry, by Redis's clock?"""
            v = r.hget("{sluice:sync}:nodes", str(i))
            sec, us = r.time()
            return v is not None and int(v.split()[1]) > sec * 1000 + us // 1000

        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and held(gone):
            time.sleep(0.2)
        assert not held(gone)
        nodes[1] = start(tmp_path, url, "auto-again")
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and ids()[1][0] != gone:
            time.sleep(0.1)
        assert ids()[1][0] == gone, ids()
    finally:
        for n in nodes:
            if n.alive():
                n.stop()


def test_peek_refund_reset_and_all_or_nothing_on_leased_keys(central, tmp_path):
    """The other ops on a leased key, on one node: a peek consumes nothing, a refund of a
    take not reported yet gives it back, a take of several limits consumes none when one
    refuses, and a reset hands the key a fresh budget (its central record deleted). The
    node trades once a minute, so that no trade changes its leases between two looks."""
    redis = central
    node = start(tmp_path, sync_url(redis, 0, nodes=1).replace(
        "interval_ms=%d" % INTERVAL_MS, "interval_ms=60000"), "ops")
    c = node.redis()

    def take(key, limit):
        return as_map(c.execute_command("SL.TAKE", key, limit, "1h"))

    assert as_map(c.execute_command("SL.PEEK", "ops:peek", 3, "1h"))["allowed"] == 1
    first = take("ops:peek", 3)
    assert first["allowed"] == 1
    # SL.DECIDE REFUND: the take is given back, and counts for nothing at the next trade.
    got = c.execute_command("SL.DECIDE", "REFUND", "0", 1, "ops:peek", "gcra", 3,
                            3600 * 10**9, 0, 1, 0, 0, 0)
    assert got == 1
    assert take("ops:peek", 3)["remaining"] == first["remaining"]
    # All or nothing: b refuses its second take, and a is given back each time.
    many = ("SL.TAKEMANY", 2, "ops:a", "ops:b", "LIMIT", 5, "1h", "LIMIT", 1, "1h")

    def peek_a():
        return as_map(c.execute_command("SL.PEEK", "ops:a", 5, "1h"))["remaining"]

    assert as_map(c.execute_command(*many))["allowed"] == 1
    left = peek_a()  # what this node's lease of a holds now
    assert as_map(c.execute_command(*many))["allowed"] == 0
    assert as_map(c.execute_command(*many))["allowed"] == 0
    assert peek_a() == left
    assert take("ops:a", 5)["remaining"] == left - 1
    # A reset deletes the central record, and the key starts whole again.
    while take("ops:r", 2)["allowed"]:
        pass
    assert c.execute_command("SL.RESET", "ops:r") == 1
    assert redis.client().exists("ops:r") == 0
    assert take("ops:r", 2)["allowed"] == 1
    c.close()
    node.stop()


MIXED = """\
policies:
  chat:
    key: "chat:{key}"
    limits:
      - {name: rph, limit: 10, period: 1h}
      - {name: month, limit: 4, period: 1mo, algorithm: fixed_window}
  tight:
    key: "tight:{key}"
    limits:
      - {name: rph, limit: 3, period: 1h}
      - {name: month, limit: 1000, period: 1mo, algorithm: fixed_window}
"""


@pytest.fixture
def mixed(central, tmp_path):
    """A sync node with policies of a rate beside a monthly quota (one node: its lease is the
    whole budget, so that what it holds moves only one way between two looks: up, as the
    rate refills), and a second sluiced on the same Redis (redis://) that reads the quota's
    count in the central."""
    cfg = tmp_path / "mixed.yaml"
    cfg.write_text(MIXED)
    node = start(tmp_path, sync_url(central, 0, nodes=1).replace(
        "interval_ms=%d" % INTERVAL_MS, "interval_ms=60000"), "mix", extra=["--config", str(cfg)])
    reader = start(tmp_path, "redis://127.0.0.1:%d" % central.port, "reader")
    c, rc = node.redis(), reader.redis()
    yield c, rc
    c.close()
    rc.close()
    for n in (node, reader):
        if n.alive():
            n.stop()


def usage(c, key, policy):
    """SL.USAGE on a sync node: a peek of both kinds at once."""
    out = {}
    for m in c.execute_command("SL.USAGE", key, "POLICY", policy):
        m = as_map(m)
        out[m["name"].decode()] = m
    return out


def quota_used(reader, policy, key, limit):
    """The month's count in the central, as a sluiced on redis:// peeks it (the policy's
    key for its limit `month`)."""
    d = as_map(reader.execute_command("SL.PEEK", "{%s:%s}\x1fmonth" % (policy, key), limit,
                                      "1mo", "COST", 0, "ALGORITHM", "fixed_window"))
    return limit - d["remaining"]


def eventually(pred):
    """pred() once it holds, within 10 s (a give-back reaches Redis after the answer)."""
    deadline = time.monotonic() + 10
    while not pred() and time.monotonic() < deadline:
        time.sleep(0.02)
    return pred()


def test_a_take_of_a_rate_and_a_quota_at_once_counts_in_both(mixed):
    c, reader = mixed
    for i in range(3):
        d = as_map(c.execute_command("SL.POLICY", "chat", "k1"))
        assert (d["allowed"], d["rejected_by"]) == (1, -1), d
    u = usage(c, "k1", "chat")
    assert u["chat.month"]["used"] == 3, u
    assert u["chat.rph"]["used"] >= 2, u  # 3 taken, a unit back every 6 minutes
    assert quota_used(reader, "chat", "k1", 4) == 3
    # SL.USAGE peeks both kinds: nothing is consumed.
    again = usage(c, "k1", "chat")
    assert again["chat.month"]["used"] == 3 and quota_used(reader, "chat", "k1", 4) == 3
    assert again["chat.rph"]["remaining"] >= u["chat.rph"]["remaining"], (u, again)


def test_a_quota_refusal_leaves_the_rate_untouched(mixed):
    c, reader = mixed
    allowed = [as_map(c.execute_command("SL.POLICY", "chat", "k2"))["allowed"]
               for _ in range(4)]
    assert allowed == [1, 1, 1, 1]
    before = usage(c, "k2", "chat")["chat.rph"]["remaining"]
    assert before <= 6
    # Twenty refusals by the quota: had each taken from the rate (10 an hour), it would
    # be spent; what it holds only grows as it refills.
    for _ in range(20):
        d = as_map(c.execute_command("SL.POLICY", "chat", "k2"))
        assert (d["allowed"], d["rejected_by"], d["binding"]) == (0, 1, b"chat.month"), d
        assert d["retry_after_ms"] > 0, d
    after = usage(c, "k2", "chat")
    assert after["chat.rph"]["remaining"] >= before, after
    assert after["chat.month"]["used"] == 4 and quota_used(reader, "chat", "k2", 4) == 4


def test_a_rate_refusal_gives_the_quota_back(mixed):
    c, reader = mixed
    admitted = 0
    refused = 0
    for _ in range(12):
        d = as_map(c.execute_command("SL.POLICY", "tight", "k3"))
        if d["allowed"]:
            admitted += 1
        else:
            refused += 1
            assert (d["rejected_by"], d["binding"]) == (0, b"tight.rph"), d
    # 3 an hour: the rate refuses most of these, and every refusal gave its month back.
    assert 3 <= admitted < 12 and refused > 0
    assert eventually(lambda: quota_used(reader, "tight", "k3", 1000) == admitted), \
        (admitted, quota_used(reader, "tight", "k3", 1000))
    assert usage(c, "k3", "tight")["tight.month"]["used"] == admitted


def results(reply):
    m = as_map(reply)
    return m["allowed"], m["rejected_by"], [as_map(d) for d in m["results"]]


def test_a_take_of_both_kinds_answers_in_the_request_order(mixed):
    c, reader = mixed
    # The window first, then the rate; the window refuses the third.
    quota_first = ("SL.TAKEMANY", 2, "o:q", "o:r", "LIMIT", 2, "1mo", "ALGORITHM",
                   "fixed_window", "LIMIT", 10, "1m")
    for left in (1, 0):
        allowed, by, (q, r) = results(c.execute_command(*quota_first))
        assert (allowed, by, q["allowed"], q["remaining"], r["allowed"]) == (1, -1, 1, left, 1)
    rate_left = r["remaining"]
    allowed, by, (q, r) = results(c.execute_command(*quota_first))
    assert (allowed, by, q["allowed"], r["allowed"]) == (0, 0, 0, 1), (q, r)
    assert r["remaining"] >= rate_left, "a peek of the rate, which the refusal left alone"
    # The rate first, then the window; the rate refuses the second, and the window's answer
    # is what it holds once given back.
    rate_first = ("SL.TAKEMANY", 2, "p:r", "p:q", "LIMIT", 1, "1h", "LIMIT", 10, "1mo",
                  "ALGORITHM", "fixed_window")
    allowed, by, (r, q) = results(c.execute_command(*rate_first))
    assert (allowed, by, r["allowed"], q["remaining"]) == (1, -1, 1, 9)
    allowed, by, (r, q) = results(c.execute_command(*rate_first))
    assert (allowed, by, r["allowed"], q["allowed"], q["remaining"]) == (0, 0, 0, 1, 9), (r, q)
    assert r["retry_after_ms"] > 0
    got = lambda: 10 - as_map(reader.execute_command(  # noqa: E731
        "SL.PEEK", "p:q", 10, "1mo", "COST", 0, "ALGORITHM", "fixed_window"))["remaining"]
    assert eventually(lambda: got() == 1), got()
    # The sync node's own pass-through peek agrees.
    assert as_map(c.execute_command("SL.PEEK", "p:q", 10, "1mo", "COST", 0, "ALGORITHM",
                                    "fixed_window"))["remaining"] == 9


def as_map(reply):
    if isinstance(reply, dict):
        return {k.decode() if isinstance(k, bytes) else k: v for k, v in reply.items()}
    return {reply[i].decode() if isinstance(reply[i], bytes) else reply[i]: reply[i + 1]
            for i in range(0, len(reply), 2)}
