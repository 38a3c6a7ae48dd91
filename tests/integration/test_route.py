"""A fleet that routes each key to its owner (--peers, --self): three sluiced on
127.0.0.1, each with the same --peers and its own --self. A key's owner is the peer of
highest rendezvous weight for the key's hash slot; the tests compute it with a model of
their own (SipHash-2-4 and CRC16 below) and check it against where the state lives
(SL.INSPECT answers from the node's own states). Real sluiced processes, real redis-py
and HTTP clients, servers stopped by PID."""

import http.client
import json
import os
import re
import signal
import socket
import struct
import threading
import time

import pytest

from conftest import Sluiced
from harness import free_port, sigstop

ALGORITHMS = ["gcra", "token_bucket", "leaky_bucket", "fixed_window", "sliding_log",
              "sliding_window"]

# ---- the model of ownership (src/backend/owner.c, slot.c) ----

MASK = (1 << 64) - 1
OWNER_KEY = (0x736c756963652d72, 0x656e64657a766f75)


def _rotl(x, b):
    return ((x << b) | (x >> (64 - b))) & MASK


def siphash24(key, data):
    k0, k1 = key
    v = [k0 ^ 0x736f6d6570736575, k1 ^ 0x646f72616e646f6d,
         k0 ^ 0x6c7967656e657261, k1 ^ 0x7465646279746573]

    def rounds(n):
        for _ in range(n):
            v[0] = (v[0] + v[1]) & MASK
            v[1] = _rotl(v[1], 13) ^ v[0]
            v[0] = _rotl(v[0], 32)
            v[2] = (v[2] + v[3]) & MASK
            v[3] = _rotl(v[3], 16) ^ v[2]
            v[0] = (v[0] + v[3]) & MASK
            v[3] = _rotl(v[3], 21) ^ v[0]
            v[2] = (v[2] + v[1]) & MASK
            v[1] = _rotl(v[1], 17) ^ v[2]
            v[2] = _rotl(v[2], 32)

    whole = len(data) - len(data) % 8
    words = [struct.unpack("<Q", data[i:i + 8])[0] for i in range(0, whole, 8)]
    last = data[whole:] + b"\0" * (8 - len(data) % 8)
    words.append(struct.unpack("<Q", last)[0] | ((len(data) & 0xff) << 56))
    for m in words:
        v[3] ^= m
        rounds(2)
        v[0] ^= m
    v[2] ^= 0xff
    rounds(4)
    return v[0] ^ v[1] ^ v[2] ^ v[3]


def crc16(data):
    crc = 0
    for byte in data:
        crc ^= byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) & 0xffff if crc & 0x8000 else (crc << 1) & 0xffff
    return crc


def slot_of(key):
    k = key.encode()
    open_ = k.find(b"{")
    if open_ >= 0:
        close = k.find(b"}", open_ + 1)
        if close > open_ + 1:
            k = k[open_ + 1:close]
    return crc16(k) % 16384


def ranking(peers, key):
    """The peers' texts for the key's slot, best first."""
    s = slot_of(key)
    weight = {p: siphash24(OWNER_KEY, p.encode() + bytes([s & 0xff, s >> 8])) for p in peers}
    return sorted(peers, key=lambda p: (-weight[p], p))


def keys_owned(peers, owner, prefix, n=1, alive=None):
    """n keys whose owner among the `alive` peers (default: all) is `owner`."""
    alive = alive if alive is not None else peers
    out, i = [], 0
    while len(out) < n:
        k = "%s:%d" % (prefix, i)
        if [p for p in ranking(peers, k) if p in alive][0] == owner:
            out.append(k)
        i += 1
    return out


# ---- the fleet ----

def as_map(reply):
    return {reply[i].decode() if isinstance(reply[i], bytes) else reply[i]: reply[i + 1]
            for i in range(0, len(reply), 2)}


def info(node, section="peers"):
    """An INFO section as redis-py reads it, every value as text."""
    return {k: str(v) for k, v in node.redis().info(section).items()}


def wait_for(what, timeout=30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if what():
            return
        time.sleep(0.05)
    pytest.fail("timed out waiting for %s" % what.__doc__)


def wait_steady(nodes, down):
    """Every node sees `down` peers down, and still does a peer's down time later (so that
    a view not yet settled at start has had the time to change)."""
    seen = []

    def steady():
        for _ in range(4):
            seen[:] = [(n.self_, info(n)) for n in nodes]
            if any(int(i["peers_down"]) != down for _, i in seen):
                return False
            time.sleep(0.1)
        return True
    steady.__doc__ = "every node to see %d peers down, steadily" % down
    try:
        wait_for(steady)
    except BaseException:
        print("the nodes' INFO peers when given up:", seen)
        raise


def start_node(tmp_path, peers, self_, name, extra=(), http=False):
    args = ["--peers", ",".join(peers), "--self", self_, "--store-timeout-ms", "2000"]
    args += list(extra)
    hp = None
    if http:
        hp = free_port()
        args += ["--http-port", str(hp)]
    s = Sluiced(args=args, workdir=str(tmp_path / name))
    os.makedirs(s.workdir, exist_ok=True)
    s.start(port=int(self_.rsplit(":", 1)[1]))
    s.http_port = hp
    s.self_ = self_
    return s


@pytest.fixture
def fleet(tmp_path):
    peers = ["127.0.0.1:%d" % free_port() for _ in range(3)]
    nodes = [start_node(tmp_path, peers, p, "n%d" % i, http=True) for i, p in enumerate(peers)]
    wait_steady(nodes, 0)
    yield peers, nodes
    for n in nodes:
        if n.alive():
            n.stop()


def holders(nodes, key):
    """The nodes that hold a state for key in their own memory."""
    return [n.self_ for n in nodes if n.redis().execute_command("SL.INSPECT", key)]


def http_get(node, path):
    c = http.client.HTTPConnection("127.0.0.1", node.http_port, timeout=10)
    try:
        c.request("GET", path)
        r = c.getresponse()
        return r.status, r.read()
    finally:
        c.close()


# ---- exact while all are up ----

@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_a_burst_over_three_nodes_admits_exactly_the_limit(fleet, algorithm):
    peers, nodes = fleet
    clients = [n.redis() for n in nodes]
    key = "burst:" + algorithm
    allowed = 0
    for i in range(30):
        reply = clients[i % 3].execute_command("SL.TAKE", key, 10, "1h", "ALGORITHM", algorithm)
        allowed += as_map(reply)["allowed"]
    assert allowed == 10
    # Decided by the owner the model names, and held there only.
    assert holders(nodes, key) == [ranking(peers, key)[0]]
    for n in nodes:
        st = info(n, "store")
        assert st["decisions_fail_open"] == "0" and st["store"] == "peers", st


def test_every_owner_holds_its_own_keys(fleet):
    peers, nodes = fleet
    c = nodes[0].redis()
    keys = ["spread:%d" % i for i in range(60)]
    for k in keys:
        assert as_map(c.execute_command("SL.TAKE", k, 5, "1h"))["allowed"] == 1
    for k in keys:
        assert holders(nodes, k) == [ranking(peers, k)[0]], k
    owners = {ranking(peers, k)[0] for k in keys}
    assert owners == set(peers), "60 keys fell on every peer"


def test_cl_throttle_over_three_nodes(fleet):
    _, nodes = fleet
    clients = [n.redis() for n in nodes]
    replies = [clients[i % 3].execute_command("CL.THROTTLE", "cell", 4, 1, 3600)
               for i in range(12)]
    assert [r[0] for r in replies] == [0] * 5 + [1] * 7
    assert replies[0][:3] == [0, 5, 4] and replies[5][:3] == [1, 5, 0]


def test_http_over_three_nodes(fleet):
    _, nodes = fleet
    statuses = [http_get(nodes[i % 3], "/v1/check?key=h:gcra&limit=5&period=3600")[0]
                for i in range(15)]
    assert statuses.count(200) == 5 and statuses.count(429) == 10


def test_a_take_of_keys_of_different_owners_is_all_or_nothing(fleet):
    peers, nodes = fleet
    a = keys_owned(peers, peers[0], "many-a")[0]
    b = keys_owned(peers, peers[1], "many-b")[0]
    clients = [n.redis() for n in nodes]
    got = []
    for i in range(6):
        r = as_map(clients[i % 3].execute_command("SL.TAKEMANY", 2, a, b, "LIMIT", 5, "1h",
                                                  "LIMIT", 3, "1h"))
        got.append(r["allowed"])
    assert got == [1, 1, 1, 0, 0, 0]
    # The refused takes gave back what they took of a: 5 - 3 left, not 5 - 6 (a peek
    # answers what a take would: one fewer). The give-backs follow the answers: a
    # concurrent take may see one before it lands, never after.
    def given_back():
        return as_map(clients[2].execute_command("SL.PEEK", a, 5, "1h"))["remaining"] == 1
    given_back.__doc__ = "the give-backs of the refused takes of %s" % a
    wait_for(given_back)
    assert holders(nodes, a) == [peers[0]] and holders(nodes, b) == [peers[1]]


POLICIES = """\
policies:
  api:
    limit: 6
    period: 1h
    tiers:
      paid: {limit: 100, period: 1h}
    global: {limit: 8, period: 1h}
"""


def test_policies_with_a_global_limit_over_three_nodes(tmp_path):
    conf = tmp_path / "sluice.yaml"
    conf.write_text(POLICIES)
    peers = ["127.0.0.1:%d" % free_port() for _ in range(3)]
    nodes = [start_node(tmp_path, peers, p, "p%d" % i, ["--config", str(conf)])
             for i, p in enumerate(peers)]
    try:
        wait_steady(nodes, 0)
        c = [n.redis() for n in nodes]
        got = [as_map(c[i % 3].execute_command("SL.POLICY", "api", "alice"))["allowed"]
               for i in range(10)]
        assert got == [1] * 6 + [0] * 4
        got = [as_map(c[i % 3].execute_command("SL.POLICY", "api", "bob", "TIER", "paid"))
               for i in range(3)]
        assert [g["allowed"] for g in got] == [1, 1, 0]
        assert got[2]["rejected_by"] == 1 and got[2]["scope"] == b"global"
    finally:
        for n in nodes:
            n.stop()


# ---- a node dies, and comes back ----

def test_a_dead_nodes_keys_move_and_come_back(fleet):
    peers, nodes = fleet
    victim, survivors = nodes[2], nodes[:2]
    live = [s.self_ for s in survivors]
    mine = {s.self_: keys_owned(peers, s.self_, "keep")[0] for s in survivors}
    lost = keys_owned(peers, victim.self_, "lost")[0]
    clients = [s.redis() for s in survivors]
    for k in list(mine.values()) + [lost]:
        for i in range(4):
            assert as_map(clients[i % 2].execute_command("SL.TAKE", k, 10, "1h"))["allowed"]

    # Traffic on the survivors' keys while the node dies: every take is answered, by
    # its owner (not a store-down policy), so their states stay exact.
    stop = threading.Event()
    taken = {k: 0 for k in mine.values()}
    errors = []

    def run():
        cs = [s.redis() for s in survivors]
        i = 0
        while not stop.is_set():
            k = list(mine.values())[i % 2]
            try:
                r = as_map(cs[i % 2].execute_command("SL.TAKE", k, 10, "1h"))
                taken[k] += r["allowed"]
            except Exception as e:  # noqa: BLE001
                errors.append(e)
            i += 1
            time.sleep(0.01)

    t = threading.Thread(target=run)
    t.start()
    try:
        time.sleep(0.2)
        victim.kill()
        wait_steady(survivors, 1)
        time.sleep(0.2)
    finally:
        stop.set()
        t.join()
    assert not errors, errors
    for s in survivors:
        assert info(s, "store")["decisions_fail_open"] == "0"
    for k in mine.values():
        for c in clients:
            left = as_map(c.execute_command("SL.PEEK", k, 10, "1h"))["remaining"]
            assert left == max(0, 5 - taken[k]), (k, left, taken[k])
    for s in survivors:
        text = http_get(s, "/metrics")[1].decode()
        assert re.search(r'^sluice_peer_up\{peer="%s"\} 0$' % re.escape(victim.self_), text,
                         re.M), text
    assert "does not answer: marked down" in survivors[0].stderr()

    # The dead node's key is decided at its next owner, which starts it afresh.
    heir = [p for p in ranking(peers, lost) if p in live][0]
    got = [as_map(clients[i % 2].execute_command("SL.TAKE", lost, 10, "1h"))["allowed"]
           for i in range(14)]
    assert sum(got) == 10
    assert holders(survivors, lost) == [heir]

    # Back on its port: its keys come back to it (fresh: it kept no snapshot).
    victim.start(port=victim.port)
    wait_steady(nodes, 0)
    assert as_map(clients[0].execute_command("SL.TAKE", lost, 10, "1h"))["remaining"] == 9
    assert victim.redis().execute_command("SL.INSPECT", lost)
    assert "answers again" in survivors[0].stderr()
    for k in mine.values():
        left = as_map(victim.redis().execute_command("SL.PEEK", k, 10, "1h"))["remaining"]
        assert left == max(0, 5 - taken[k])


# ---- bad peers ----

def garbage_server():
    """A socket that answers anything with bytes that are not RESP."""
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", 0))
    ls.listen(16)
    ls.settimeout(0.2)
    stop = threading.Event()

    def serve():
        conns = []
        while not stop.is_set():
            try:
                c, _ = ls.accept()
                c.sendall(b"\x00\x01garbage that is not RESP\xff\r\n")
                conns.append(c)
            except OSError:
                pass
        for c in conns:
            c.close()
        ls.close()

    t = threading.Thread(target=serve)
    t.start()
    return ls.getsockname()[1], stop, t


@pytest.mark.parametrize("kind", ["nobody_listens", "garbage"])
def test_a_peer_that_is_not_sluiced_is_marked_down(tmp_path, kind):
    stop = t = None
    if kind == "garbage":
        port, stop, t = garbage_server()
    else:
        port = free_port()
    me = "127.0.0.1:%d" % free_port()
    bad = "127.0.0.1:%d" % port
    peers = [me, bad]
    node = start_node(tmp_path, peers, me, "bad", ["--on-store-error", "fail_closed"])
    try:
        wait_steady([node], 1)
        # The bad peer's keys are this node's now: exact, decided here.
        k = keys_owned(peers, bad, "orphan")[0]
        c = node.redis()
        got = [as_map(c.execute_command("SL.TAKE", k, 5, "1h"))["allowed"] for _ in range(8)]
        assert got == [1] * 5 + [0] * 3
        assert node.redis().execute_command("SL.INSPECT", k)
        assert "peer %s does not answer" % bad in node.stderr()
        node.assert_serving()
    finally:
        node.stop()
        if stop:
            stop.set()
            t.join()


def silent_server():
    """A socket that accepts connections, reads what comes, and never answers."""
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", 0))
    ls.listen(16)
    ls.settimeout(0.1)
    stop = threading.Event()
    accepted = []

    def serve():
        conns = []
        while not stop.is_set():
            try:
                c, _ = ls.accept()
                c.setblocking(False)
                conns.append(c)
                accepted.append(c)
            except OSError:
                pass
            for c in conns:
                try:
                    c.recv(65536)
                except OSError:
                    pass
        for c in conns:
            c.close()
        ls.close()

    t = threading.Thread(target=serve)
    t.start()
    return ls.getsockname()[1], stop, t, accepted


def test_a_check_sent_to_a_silent_peer_is_decided_by_the_fallback(tmp_path):
    """A peer that takes the connection and never answers: the first check of its keys
    waits --store-timeout-ms and --on-store-error decides it (fail_closed: refused); the
    peer is then marked down, and its keys are decided here, exactly."""
    port, stop, t, accepted = silent_server()
    me = "127.0.0.1:%d" % free_port()
    bad = "127.0.0.1:%d" % port
    peers = [me, bad]
    node = start_node(tmp_path, peers, me, "silent",
                      ["--on-store-error", "fail_closed", "--store-timeout-ms", "100"])
    try:
        k = keys_owned(peers, bad, "hush")[0]
        c = node.redis()
        r = as_map(c.execute_command("SL.TAKE", k, 5, "1h"))
        assert r["allowed"] == 0
        assert info(node, "store")["decisions_fail_closed"] == "1"
        wait_steady([node], 1)
        got = [as_map(c.execute_command("SL.TAKE", k, 5, "1h"))["allowed"] for _ in range(7)]
        assert got == [1] * 5 + [0] * 2
        assert info(node, "store")["decisions_fail_closed"] == "1"
        # Its probe unanswered, the connection is made again (not left to TCP's own
        # timeout): more connections than the workers' first ones.
        first = len(accepted)

        def reconnected():
            return len(accepted) > first
        reconnected.__doc__ = "a new connection to the silent peer"
        wait_for(reconnected)
        node.assert_serving()
    finally:
        node.stop()
        stop.set()
        t.join()


def test_a_node_that_hangs_is_marked_down_and_comes_back(fleet):
    """SIGSTOP: no reset, no refusal, only silence. The others mark it down when their
    checks and probes go unanswered, its keys go to their next owner, and when it runs
    again (SIGCONT) it is up again everywhere."""
    peers, nodes = fleet
    victim, survivors = nodes[1], [nodes[0], nodes[2]]
    live = [s.self_ for s in survivors]
    lost, poke = keys_owned(peers, victim.self_, "hang", 2)
    clients = [s.redis() for s in survivors]
    assert as_map(clients[0].execute_command("SL.TAKE", lost, 5, "1h"))["allowed"] == 1
    sigstop(victim.proc.pid)  # stopped before a poke is sent: no answer may come
    try:
        # A check to it now waits, is answered by the fallback (fail_open), and marks it
        # down on the node that sent it.
        for c in clients:
            assert as_map(c.execute_command("SL.TAKE", poke, 5, "1h"))["allowed"] == 1
        wait_steady(survivors, 1)
        heir = [p for p in ranking(peers, lost) if p in live][0]
        got = [as_map(clients[i % 2].execute_command("SL.TAKE", lost, 5, "1h"))["allowed"]
               for i in range(7)]
        assert sum(got) == 5
        assert holders(survivors, lost) == [heir]
    finally:
        os.kill(victim.proc.pid, signal.SIGCONT)
    wait_steady(nodes, 0)
    # Back at its owner, which kept its state: 1 taken before it stopped.
    r = as_map(clients[1].execute_command("SL.TAKE", lost, 5, "1h"))
    assert r["remaining"] == 3, r


def test_peers_lists_that_disagree_are_counted_and_logged(tmp_path):
    """Node b names node a as localhost:PORT, node a itself as 127.0.0.1:PORT: the two
    weigh different texts, so b sends a some keys a does not own by its own list. a
    decides them (never routes a SL.DECIDE again), counts them, and says so."""
    pa, pb = free_port(), free_port()
    a_view = ["127.0.0.1:%d" % pa, "127.0.0.1:%d" % pb]
    b_view = ["localhost:%d" % pa, "127.0.0.1:%d" % pb]
    a = start_node(tmp_path, a_view, a_view[0], "a", http=True)
    b = start_node(tmp_path, b_view, b_view[1], "b")
    try:
        wait_steady([a, b], 0)
        # Keys b sends to a, that a's list gives to b.
        keys = [k for k in ("d:%d" % i for i in range(400))
                if ranking(b_view, k)[0] == b_view[0] and ranking(a_view, k)[0] == a_view[1]]
        assert keys
        c = b.redis()
        for k in keys[:20]:
            assert as_map(c.execute_command("SL.TAKE", k, 5, "1h"))["allowed"] == 1
        # Decided at a, where b sent them, not forwarded back to b.
        assert a.redis().execute_command("SL.INSPECT", keys[0])
        assert not b.redis().execute_command("SL.INSPECT", keys[0])
        assert int(info(a)["peer_disagreements"]) >= min(20, len(keys))
        text = http_get(a, "/metrics")[1].decode()
        m = re.search(r"^sluice_peer_disagreements_total (\d+)$", text, re.M)
        assert m and int(m.group(1)) >= min(20, len(keys)), text
        assert "the nodes' --peers lists disagree" in a.stderr()
    finally:
        a.stop()
        b.stop()


def test_info_names_the_fleet(fleet):
    peers, nodes = fleet
    for n in nodes:
        i = info(n)
        assert i["peers"] == "3" and i["peer_self"] == n.self_ and i["peers_down"] == "0"
        assert i["peer_disagreements"] == "0"


def test_a_nodes_own_keys_are_decided_in_it_without_a_hop(fleet):
    """A check whose keys this node owns is decided on its memory, not sent over loopback
    to itself: the peers' transport counts no request for it; a key of another owner
    counts one."""
    peers, nodes = fleet
    own = keys_owned(peers, peers[0], "own", 2)
    far = keys_owned(peers, peers[1], "far")[0]
    c = nodes[0].redis()
    before = int(info(nodes[0], "store")["store_requests"])
    assert as_map(c.execute_command("SL.TAKE", own[0], 5, "1h"))["allowed"] == 1
    r = as_map(c.execute_command("SL.TAKEMANY", 2, own[0], own[1], "LIMIT", 5, "1h",
                                 "LIMIT", 5, "1h"))
    assert r["allowed"] == 1
    assert int(info(nodes[0], "store")["store_requests"]) == before
    assert as_map(c.execute_command("SL.TAKE", far, 5, "1h"))["allowed"] == 1
    assert int(info(nodes[0], "store")["store_requests"]) == before + 1
    # Either way the state is the owner's, exact: a third take leaves 2 of 5.
    assert as_map(nodes[2].redis().execute_command("SL.TAKE", own[0], 5, "1h"))["remaining"] == 2
    assert holders(nodes, own[0]) == [peers[0]] and holders(nodes, far) == [peers[1]]


def test_a_fleet_with_a_password_routes_with_it(tmp_path):
    """The peers AUTH with the --requirepass they share: a fleet behind a password routes
    exactly; a node with another password is not a peer (its keys go to the next)."""
    peers = ["127.0.0.1:%d" % free_port() for _ in range(3)]
    nodes = []
    for i, p in enumerate(peers):
        s = Sluiced(args=["--peers", ",".join(peers), "--self", p, "--store-timeout-ms", "2000"],
                    password="s3cret" if i < 2 else "other", workdir=str(tmp_path / ("a%d" % i)))
        os.makedirs(s.workdir, exist_ok=True)
        s.start(port=int(p.rsplit(":", 1)[1]))
        s.self_ = p
        nodes.append(s)
    try:
        wait_steady(nodes[:2], 1)
        c = [n.redis() for n in nodes[:2]]
        k = keys_owned(peers, peers[1], "auth")[0]
        got = [as_map(c[i % 2].execute_command("SL.TAKE", k, 4, "1h"))["allowed"]
               for i in range(8)]
        assert got == [1] * 4 + [0] * 4
        assert holders(nodes[:2], k) == [peers[1]]
        # The one with another password: marked down by the two others, its keys theirs.
        lost = keys_owned(peers, peers[2], "auth-lost")[0]
        heir = [p for p in ranking(peers, lost) if p != peers[2]][0]
        got = [as_map(c[i % 2].execute_command("SL.TAKE", lost, 4, "1h"))["allowed"]
               for i in range(6)]
        assert sum(got) == 4
        assert holders(nodes[:2], lost) == [heir]
    finally:
        for n in nodes:
            n.stop()


# ---- membership reloaded on SIGHUP ----

def write_conf(path, peers, self_):
    path.write_text("server:\n  peers: %s\n  self: %s\n" % (",".join(peers), self_))


def test_sighup_reloads_the_peers_of_the_config_file(tmp_path):
    """Two nodes, then a third: the two reload their config file's peers: on SIGHUP, the
    keys the new node now owns go to it (afresh), the others keep their exact states."""
    ports = [free_port() for _ in range(3)]
    peers = ["127.0.0.1:%d" % p for p in ports]
    two = peers[:2]
    nodes = []
    for i in range(2):
        conf = tmp_path / ("n%d.yaml" % i)
        write_conf(conf, two, peers[i])
        s = Sluiced(args=["--config", str(conf), "--store-timeout-ms", "2000"],
                    workdir=str(tmp_path / ("h%d" % i)))
        os.makedirs(s.workdir, exist_ok=True)
        s.start(port=ports[i])
        s.self_, s.conf = peers[i], conf
        nodes.append(s)
    try:
        wait_steady(nodes, 0)
        # A key that stays with its owner (the best of three is one of the two, so the
        # best of the two), and one that the third node will own.
        stay = next(k for k in ("stay:%d" % i for i in range(500)) if ranking(peers, k)[0] in two)
        move = keys_owned(peers, peers[2], "move")[0]
        c = [n.redis() for n in nodes]
        for k in (stay, move):
            for i in range(3):
                assert as_map(c[i % 2].execute_command("SL.TAKE", k, 10, "1h"))["allowed"]

        third = start_node(tmp_path, peers, peers[2], "h2")
        nodes.append(third)
        for n in nodes[:2]:
            write_conf(n.conf, peers, n.self_)
            os.kill(n.proc.pid, signal.SIGHUP)

        def reloaded():
            return all(info(n)["peers"] == "3" for n in nodes)
        reloaded.__doc__ = "both nodes to route among three peers"
        wait_for(reloaded)
        wait_steady(nodes, 0)
        time.sleep(0.2)  # past the transports' next tick: every worker on the new list
        assert "routing keys among 3 peers now (2 before)" in nodes[0].stderr()
        assert "server settings take effect" not in nodes[0].stderr()

        cs = [n.redis() for n in nodes]
        # The moved key starts afresh at the third node; the other keeps 7 of 10.
        got = [as_map(cs[i % 3].execute_command("SL.TAKE", move, 10, "1h"))["allowed"]
               for i in range(12)]
        assert sum(got) == 10
        assert third.redis().execute_command("SL.INSPECT", move)
        r = as_map(cs[2].execute_command("SL.TAKE", stay, 10, "1h"))
        assert r["remaining"] == 6, r
    finally:
        for n in nodes:
            n.stop()


def test_sighup_keeps_the_peers_when_self_would_change(tmp_path):
    pa, pb = free_port(), free_port()
    peers = ["127.0.0.1:%d" % pa, "127.0.0.1:%d" % pb]
    conf = tmp_path / "n.yaml"
    write_conf(conf, peers, peers[0])
    s = Sluiced(args=["--config", str(conf)], workdir=str(tmp_path / "s"))
    os.makedirs(s.workdir, exist_ok=True)
    s.start(port=pa)
    try:
        write_conf(conf, peers, peers[1])
        os.kill(s.proc.pid, signal.SIGHUP)

        def said():
            return "peers not reloaded: self changed" in s.stderr()
        said.__doc__ = "the refusal in the log"
        wait_for(said)
        assert info(s)["peers"] == "2"
        # A list that is refused keeps the one in force too.
        write_conf(conf, [peers[0], "nonsense"], peers[0])
        os.kill(s.proc.pid, signal.SIGHUP)

        def refused():
            return "peers not reloaded, keeping 2: invalid --peers" in s.stderr()
        refused.__doc__ = "the bad list's refusal in the log"
        wait_for(refused)
        assert info(s)["peers"] == "2"
        s.assert_serving()
    finally:
        s.stop()


def test_a_node_with_a_snapshot_comes_back_with_its_keys_states(tmp_path):
    """Each node's --snapshot holds the states of the keys it owns: stopped and started
    again, a node answers for them where it left off."""
    peers = ["127.0.0.1:%d" % free_port() for _ in range(3)]
    nodes = [start_node(tmp_path, peers, p, "z%d" % i,
                        ["--snapshot", str(tmp_path / ("z%d.snap" % i))])
             for i, p in enumerate(peers)]
    try:
        wait_steady(nodes, 0)
        k = keys_owned(peers, peers[1], "snap")[0]
        c = nodes[0].redis()
        for _ in range(3):
            assert as_map(c.execute_command("SL.TAKE", k, 10, "1h"))["allowed"] == 1
        nodes[1].stop()
        nodes[1].start(port=nodes[1].port)
        wait_steady(nodes, 0)
        r = as_map(nodes[2].redis().execute_command("SL.TAKE", k, 10, "1h"))
        assert r["remaining"] == 6, r
    finally:
        for n in nodes:
            n.stop()


def test_a_reset_at_any_node_forgets_the_key_at_its_owner(fleet):
    peers, nodes = fleet
    k1, k2 = keys_owned(peers, peers[2], "forget", 2)
    c = nodes[0].redis()
    for k in (k1, k2):
        assert as_map(c.execute_command("SL.TAKE", k, 3, "1h"))["allowed"] == 1
    assert holders(nodes, k1) == [peers[2]]
    # Over RESP at one non-owner, over HTTP at the other.
    assert c.execute_command("SL.RESET", k1) == 1
    hc = http.client.HTTPConnection("127.0.0.1", nodes[1].http_port, timeout=10)
    hc.request("DELETE", "/v1/keys/" + k2)
    resp = hc.getresponse()
    assert resp.status == 200 and json.loads(resp.read())["reset"] is True
    hc.close()
    assert holders(nodes, k1) == [] and holders(nodes, k2) == []
    # GET /v1/keys/{key} answers what the asked node holds: the owner has it.
    c.execute_command("SL.TAKE", k1, 3, "1h")
    assert http_get(nodes[2], "/v1/keys/" + k1)[0] == 200
    assert http_get(nodes[0], "/v1/keys/" + k1)[0] == 404


def test_a_self_on_another_port_is_warned_of(tmp_path):
    me, other = free_port(), free_port()
    peers = ["127.0.0.1:%d" % other, "127.0.0.1:%d" % free_port()]
    s = Sluiced(args=["--peers", ",".join(peers), "--self", peers[0]],
                workdir=str(tmp_path / "w"))
    os.makedirs(s.workdir, exist_ok=True)
    s.start(port=me)
    try:
        assert "--self %s is not on --port %d" % (peers[0], me) in s.stderr()
        s.assert_serving()
    finally:
        s.stop()


def test_the_local_fallback_enforces_the_limit_over_the_peers(tmp_path):
    """--on-store-error local over peers: a check its owner does not answer is decided by
    a limiter in this node at limit / N, N the peers (2 here)."""
    port, stop, t, _ = silent_server()
    me = "127.0.0.1:%d" % free_port()
    bad = "127.0.0.1:%d" % port
    peers = [me, bad]
    node = start_node(tmp_path, peers, me, "local",
                      ["--on-store-error", "local", "--store-timeout-ms", "100"])
    try:
        k = keys_owned(peers, bad, "share")[0]
        r = as_map(node.redis().execute_command("SL.TAKE", k, 10, "1h",
                                                "ALGORITHM", "fixed_window"))
        assert r["allowed"] == 1 and r["limit"] == 5, r
        assert info(node, "store")["decisions_local"] == "1"
    finally:
        node.stop()
        stop.set()
        t.join()
