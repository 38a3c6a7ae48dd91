"""sluice.lua's op SYNC, the sync strategy's central command (src/algo/quota.c's
sl_quota_sync ported to Lua), on a real redis-server without the module, against the C
rules themselves: build/tests/quota_replay (tests/backend/quota_replay.c) on the same
syncs must give the same grant and remaining after every sync, and the same 85 fields
of sl_quota_central as the record the script keeps under the key.

Times. The shared cases (tests/testdata/sync_cases.py) run from T0, 2025-12-01, which
is in the past: a record's expiry follows its times (the moment it is as good as never
seen), so Redis would drop every record at once. Each case is therefore shifted by a
whole number of days into the future, for the script and for quota_replay alike (the
rules read only differences of times, and both get the same script of syncs).
"""

import os
import random
import subprocess
import time
import uuid

import pytest

from conftest import ROOT
from redis_server import RedisServer
from respclient import Error
from sync_cases import BAD_CONFIGS, BAD_SYNCS, CASES, SCALE, SEC, T0, replay_script

SCRIPT = os.path.join(ROOT, "src", "backend", "lua", "sluice.lua")
REPLAY = os.path.join(ROOT, "build", "tests", "quota_replay")
DAY = 86400 * SEC
TIME_MAX = 2**62 - 1           # sluice.h's SL_TIME_MAX
UNITS_MAX = 2**44              # quota.h's SL_QUOTA_UNITS_MAX
LUA_UNITS_MAX = 2**37 - 1      # the script's limit, burst and admitted
LUA_SPAN_MAX = 2**53 - 1       # the script's period_ns, interval_ns and length_ns
LUA_DEBT_MAX = 2**53           # the deepest debt the script records
FOREIGN = "WRONGTYPE Operation against a key holding the wrong kind of value"
OTHER_STATE = ("WRONGTYPE key holds a state of another algorithm or size that this limit "
               "cannot carry over (SL.RESET the key to start it again)")


def script_text():
    with open(SCRIPT) as f:
        return f.read()


@pytest.fixture(scope="module")
def plain(tmp_path_factory):
    """One redis-server without the module for the whole file."""
    s = RedisServer(str(tmp_path_factory.mktemp("plain")), module=False).start()
    yield s
    s.stop()


@pytest.fixture(scope="module")
def sha(plain):
    r = plain.client()
    assert not any(m.get(b"name") == b"sluice" for m in r.module_list())
    s = r.script_load(script_text())
    r.close()
    return s


@pytest.fixture
def conn(plain):
    c = plain.conn()
    yield c
    c.close()


@pytest.fixture
def key():
    return "sync:%s" % uuid.uuid4().hex[:12]


@pytest.fixture(scope="module")
def shift(plain):
    """Whole days that bring T0 a day or more after the server's clock."""
    r = plain.client()
    sec, us = r.time()
    r.close()
    now = sec * SEC + us * 1000
    return ((now - T0) // DAY + 2) * DAY


def call(c, *args):
    c.send_command(*args)
    return c.read_reply()


def shifted(syncs, by):
    return [(s[0] + by,) + tuple(s[1:]) for s in syncs]


def sync_args(config, s, at=True):
    alg, limit, period, burst, interval, nodes = config
    t, node, admitted, asked, length, carry = s
    a = [alg, limit, period, burst, interval, nodes, node, admitted, asked, length, carry]
    if at:
        a += ["AT", t]
    return [str(x) for x in a]


def sync(c, sha, key, config, s, at=True):
    return call(c, "EVALSHA", sha, 1, key, "SYNC", "0", *sync_args(config, s, at))


def record(c, key):
    """The 85 fields of the key's sync record, or None when it is absent."""
    v = call(c, "GET", key)
    if v is None:
        return None
    words = v.decode().split(" ")
    assert words[:2] == ["sluice.lua/1", "sync"] and len(words) == 87, v
    return [int(w) for w in words[2:]]


def parse_line(line):
    """A grant or a state line as its integers, an error line as ("error", name)."""
    w = line.split()
    if w[0] in ("grant", "state"):
        return [int(x) for x in w[1:]]
    return ("error", w[1])


def c_config(config):
    """The config as sl_quota_config_init takes it: SL.SYNC's burst of 0 is the limit,
    and its algorithm's name is read in any case."""
    alg, limit, period, burst, interval, nodes = config
    return (alg.lower(), limit, period, burst or limit, interval, nodes)


def replay(config, syncs):
    """quota_replay on the syncs: (its config line, a grant or error per sync, the
    state's fields at the end)."""
    config = c_config(config)
    out = subprocess.run([REPLAY], input=replay_script(config, syncs), capture_output=True,
                         text=True, check=True, timeout=60).stdout.splitlines()
    assert len(out) == len(syncs) + 2, out
    return out[0], [parse_line(l) for l in out[1:-1]], parse_line(out[-1])


class Replay:
    """quota_replay as a live oracle, a line at a time (it flushes each answer)."""

    def __init__(self, config):
        self.p = subprocess.Popen([REPLAY], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  text=True, bufsize=1)
        assert self.ask("config %s %d %d %d %d %d" % c_config(config)) == "ok"

    def ask(self, line):
        self.p.stdin.write(line + "\n")
        self.p.stdin.flush()
        return self.p.stdout.readline().strip()

    def sync(self, s):
        return parse_line(self.ask("sync %d %d %d %d %d %d" % s))

    def state(self):
        return parse_line(self.ask("state"))

    def close(self):
        self.p.stdin.close()
        self.p.wait(timeout=10)


def ceil_div(a, b):
    return -(-a // b)


def expiry_ms(config, f):
    """The record's PXAT by the rule: the latest of every lease's end and the budget's
    return to the brim (without the refill's remainder), in Unix ms rounded up."""
    _, limit, period, burst, interval, _ = config
    rate, brim = limit * SCALE, (burst or limit) * SCALE
    remaining, anchor = f[2], f[3]
    at = anchor + ceil_div((brim - remaining) * period, rate)
    for j in range(16):
        synced_at, demand = f[5 + 5 * j], f[6 + 5 * j]
        if demand > 0:
            at = max(at, synced_at + 3 * interval)
    return ceil_div(min(at, TIME_MAX), 10**6)


def check_expiry(c, key, config, fields):
    assert call(c, "PEXPIRETIME", key) == expiry_ms(config, fields), fields


# ---- 1. the shared cases ----

@pytest.mark.parametrize("name,config,syncs", CASES, ids=[c[0] for c in CASES])
def test_case_against_quota_replay(conn, sha, key, shift, name, config, syncs):
    syncs = shifted(syncs, shift)
    head, grants, state = replay(config, syncs)
    assert head == "ok"
    for i, (s, want) in enumerate(zip(syncs, grants)):
        got = sync(conn, sha, key, config, s)
        if isinstance(want, tuple):
            assert isinstance(got, Error), (i, s, got, want)
            continue
        assert got == want, (i, s)
        check_expiry(conn, key, config, record(conn, key))
    assert record(conn, key) == state


# ---- 2. what sl_quota_sync and sl_quota_config_init refuse ----

# The script's words for each of sync_cases' refusals, in their order.
BAD_SYNC_TEXTS = [
    "ERR node must be an integer from 0 to 2",
    "ERR asked must be an integer from 2 to 17592186044416",
    "ERR length_ns must be an integer from 0 to 9007199254740991",
    "ERR carry must be an integer from 0 to 65536",
]
BAD_CONFIG_TEXTS = [
    "ERR sync leases rates only: gcra, token_bucket or leaky_bucket",
    "ERR nodes must be an integer from 1 to 16",
    "ERR interval_ns must be an integer from 1 to 9007199254740991",
    "ERR limit must be an integer from 1 to 137438953471",
    "ERR burst must be an integer from 0 to 137438953471",
]
GOOD = ("gcra", 100, SEC, 100, SEC // 10, 3)


def test_every_refusal_has_its_text():
    assert len(BAD_SYNC_TEXTS) == len(BAD_SYNCS) and len(BAD_CONFIG_TEXTS) == len(BAD_CONFIGS)


def synced_once(conn, sha, key, shift, config=GOOD):
    first = (T0 + shift, 0, 1, 2, SEC // 10, 0)
    assert isinstance(sync(conn, sha, key, config, first), list)
    return call(conn, "GET", key), call(conn, "PEXPIRETIME", key)


@pytest.mark.parametrize("i", range(len(BAD_SYNCS)))
def test_bad_sync_is_refused_and_changes_nothing(conn, sha, key, shift, i):
    config, bad, name = BAD_SYNCS[i]
    bad = shifted([bad], shift + 1)[0]
    first = (T0 + shift, 0, 1, 2, SEC // 10, 0)
    _, grants, _ = replay(config, [first, bad])
    assert grants[1] == ("error", name)  # the C refuses it too
    before = synced_once(conn, sha, key, shift, config)
    got = sync(conn, sha, key, config, bad)
    assert isinstance(got, Error) and got.message == BAD_SYNC_TEXTS[i], got
    assert (call(conn, "GET", key), call(conn, "PEXPIRETIME", key)) == before


@pytest.mark.parametrize("i", range(len(BAD_CONFIGS)))
def test_bad_config_is_refused_and_changes_nothing(conn, sha, key, shift, i):
    config, name = BAD_CONFIGS[i]
    s = (T0 + shift + 1, 0, 1, 2, SEC // 10, 0)
    head, _, _ = replay(config, [s])
    assert head == "error %s" % name  # the C refuses it too
    before = synced_once(conn, sha, key, shift)
    got = sync(conn, sha, key, config, s)
    assert isinstance(got, Error) and got.message == BAD_CONFIG_TEXTS[i], got
    assert (call(conn, "GET", key), call(conn, "PEXPIRETIME", key)) == before


# ---- 3. argument errors ----

BASE = ["gcra", "100", str(SEC), "100", str(SEC // 10), "3", "0", "1", "2", str(SEC // 10), "0"]
POS = {n: i for i, n in enumerate(["algorithm", "limit", "period_ns", "burst", "interval_ns",
                                   "nodes", "node", "admitted", "asked", "length_ns", "carry"])}


def argv(tail=None, **changes):
    a = list(BASE)
    for name, value in changes.items():
        a[POS[name]] = str(value)
    return a + (["AT", str(T0 + 2 * DAY)] if tail is None else list(tail))


def rng_text(name, lo, hi):
    return "ERR %s must be an integer from %d to %d" % (name, lo, hi)


LIMIT = rng_text("limit", 1, LUA_UNITS_MAX)
PERIOD = rng_text("period_ns", 1, LUA_SPAN_MAX)
BURST = rng_text("burst", 0, LUA_UNITS_MAX)
INTERVAL = rng_text("interval_ns", 1, LUA_SPAN_MAX)
NODES = rng_text("nodes", 1, 16)
ADMITTED = rng_text("admitted", 0, LUA_UNITS_MAX)
LENGTH = rng_text("length_ns", 0, LUA_SPAN_MAX)
CARRY = rng_text("carry", 0, SCALE)
AT = rng_text("AT", 0, TIME_MAX)
RATES_ONLY = "ERR sync leases rates only: gcra, token_bucket or leaky_bucket"

ARG_ERRORS = [
    (argv(algorithm="nope"), "ERR unknown algorithm"),
    (argv(algorithm="cell"), "ERR unknown algorithm"),  # SL.DECIDE's alone
    (argv(algorithm=""), "ERR unknown algorithm"),
    (argv(algorithm="fixed_window"), RATES_ONLY),
    (argv(algorithm="Sliding_Log"), RATES_ONLY),
    (argv(algorithm="sliding_window"), RATES_ONLY),
    (argv(algorithm="concurrency"), RATES_ONLY),
    (argv(limit=0), LIMIT),
    (argv(limit=-1), LIMIT),
    (argv(limit="x"), LIMIT),
    (argv(limit="1.5"), LIMIT),
    (argv(limit=" 5"), LIMIT),
    (argv(limit="99999999999999999999"), LIMIT),
    (argv(limit=2**37), LIMIT),              # the script's range, narrower than SL.SYNC's
    (argv(limit=2**44), LIMIT),
    (argv(period_ns=0), PERIOD),
    (argv(period_ns=2**53), PERIOD),         # the script's range
    (argv(period_ns=2**61 - 1), PERIOD),
    (argv(burst=-1), BURST),
    (argv(burst=2**37), BURST),              # the script's range
    (argv(interval_ns=0), INTERVAL),
    (argv(interval_ns=2**53), INTERVAL),     # the script's range
    (argv(nodes=0), NODES),
    (argv(nodes=17), NODES),
    (argv(node=3), rng_text("node", 0, 2)),
    (argv(node=-1), rng_text("node", 0, 2)),
    (argv(nodes=1, node=1), rng_text("node", 0, 0)),
    (argv(admitted=-1), ADMITTED),
    (argv(admitted=2**37, asked=2**37), ADMITTED),  # the script's range
    (argv(admitted=5, asked=4), rng_text("asked", 5, UNITS_MAX)),
    (argv(asked=2**44 + 1), rng_text("asked", 1, UNITS_MAX)),
    (argv(asked="two"), rng_text("asked", 1, UNITS_MAX)),
    (argv(length_ns=-1), LENGTH),
    (argv(length_ns=2**53), LENGTH),         # the script's range
    (argv(carry=-1), CARRY),
    (argv(carry=SCALE + 1), CARRY),
    (argv(tail=["AT", "-1"]), AT),
    (argv(tail=["AT", str(TIME_MAX + 1)]), AT),
    (argv(tail=["AT", "9223372036854775807"]), AT),
    (argv(tail=["AT", "now"]), AT),
    (argv(tail=["AT"]), "ERR syntax error"),
    (argv(tail=["NOPE", "1"]), "ERR syntax error"),
    (argv(tail=["AT", "1", "AT", "1"]), "ERR syntax error"),
    (argv(tail=["AT", "1", "x"]), "ERR syntax error"),
    (argv()[:-3], "ERR wrong number of arguments for 'sl.sync' command"),
    ([], "ERR wrong number of arguments for 'sl.sync' command"),
    # the first bad argument in order is the one named
    (argv(limit=0, nodes=17), LIMIT),
    (argv(algorithm="nope", limit=0), "ERR unknown algorithm"),
    (argv(nodes=17, carry=-1), NODES),
    (argv(carry=-1, tail=["NOPE"]), CARRY),
]


@pytest.mark.parametrize("args,text", ARG_ERRORS, ids=range(len(ARG_ERRORS)))
def test_argument_errors(conn, sha, key, args, text):
    got = call(conn, "EVALSHA", sha, 1, key, "SYNC", "0", *args)
    assert isinstance(got, Error) and got.message == text, (args, got)
    assert call(conn, "EXISTS", key) == 0


def test_lease_and_numkeys_errors(conn, sha, key):
    got = call(conn, "EVALSHA", sha, 1, key, "SYNC", "1", *argv())
    assert got.message == \
        "ERR syntax error: the lease is 16 hex digits for ACQUIRE and RELEASE, else 0"
    got = call(conn, "EVALSHA", sha, 2, key, key + "2", "SYNC", "0", *argv())
    assert got.message == "ERR numkeys must be 1 for SYNC"
    got = call(conn, "EVALSHA", sha, 0, "SYNC", "0", *argv())
    assert got.message == "ERR numkeys must be 1 for SYNC"
    assert call(conn, "EXISTS", key, key + "2") == 0


# The tops of the script's ranges, and the spellings it takes: answered as the C does.
EDGES = [
    (("GCRA", 1, 1, 0, 1, 1), (0, 0, 0, 0, 0, 0)),
    (("Token_Bucket", LUA_UNITS_MAX, LUA_SPAN_MAX, LUA_UNITS_MAX, LUA_SPAN_MAX, 16),
     (0, 15, LUA_UNITS_MAX, UNITS_MAX, LUA_SPAN_MAX, SCALE)),
    (("leaky_bucket", 1, LUA_SPAN_MAX, 0, LUA_SPAN_MAX, 16),
     (0, 0, LUA_UNITS_MAX, UNITS_MAX, 1, SCALE)),
]


@pytest.mark.parametrize("config,s", EDGES, ids=range(len(EDGES)))
@pytest.mark.parametrize("at", [0, 1, 999, 1000, TIME_MAX - 1, TIME_MAX])
def test_range_tops_are_taken(conn, sha, key, config, s, at):
    s = (at,) + s[1:]
    _, grants, state = replay(config, [s])
    args = sync_args(config, s)[:-2] + ["at", str(at)]  # AT in any case
    got = call(conn, "EVALSHA", sha, 1, key, "SYNC", "0", *args)
    assert got == grants[0]
    if at >= TIME_MAX - 1:  # only there does the record outlive the call
        assert record(conn, key) == state
        check_expiry(conn, key, config, state)


# ---- 4. the server's clock ----

def server_ns(c):
    sec, us = call(c, "TIME")
    return int(sec) * SEC + int(us) * 1000


def test_without_at_the_servers_clock_decides(conn, sha, key):
    config = ("gcra", 100, SEC, 100, SEC, 3)
    before = server_ns(conn)
    a = sync(conn, sha, key, config, (0, 0, 0, 50, 0, 0), at=False)
    after = server_ns(conn)
    f = record(conn, key)
    t1 = f[5]  # node 0's synced_at
    assert before <= t1 <= after and t1 % 1000 == 0, (before, t1, after)
    assert f[1] == f[3] == t1  # first and anchor
    time.sleep(0.02)
    b = sync(conn, sha, key, config, (0, 1, 30, 40, SEC, 0), at=False)
    f = record(conn, key)
    t2 = f[10]  # node 1's synced_at
    assert t2 >= after, (t2, after)
    # the times the script read replay to the same answers and record in the C
    _, grants, state = replay(config, [(t1, 0, 0, 50, 0, 0), (t2, 1, 30, 40, SEC, 0)])
    assert [a, b] == grants and f == state
    check_expiry(conn, key, config, f)


# ---- 5. WRONGTYPE both ways, and the expiry ----

def test_sync_on_a_value_that_is_no_sync_record(plain, conn, sha, key, shift):
    r = plain.client()
    fields = " ".join(["0"] * 85)
    values = [
        (b"hello", FOREIGN),
        (b"\xf1\x01\xfe\x00" + b"\x00" * 680, FOREIGN),  # the module's framing
        (b"sluice.lua/1 nope - - 1 2 3", FOREIGN),
        (b"sluice.lua/1 sync " + " ".join(["0"] * 84).encode(), FOREIGN),
        (b"sluice.lua/1 sync " + fields.encode() + b" 0", FOREIGN),
        (b"sluice.lua/1 sync x" + fields[1:].encode(), FOREIGN),
        (b"sluice.lua/1 sync " + fields.replace("0", "1.5", 1).encode(), FOREIGN),
        (b"sluice.lua/1 sync", FOREIGN),
    ]
    s = (T0 + shift, 0, 1, 2, SEC // 10, 0)
    for i, (v, text) in enumerate(values):
        k = "%s:%d" % (key, i)
        r.set(k, v, px=3600000)
        got = sync(conn, sha, k, GOOD, s)
        assert isinstance(got, Error) and got.message == text, (v, got)
        assert r.get(k) == v and r.pttl(k) > 3500000
    # other types
    r.rpush(key + ":list", "x")
    r.hset(key + ":hash", "f", "v")
    for k in (key + ":list", key + ":hash"):
        got = sync(conn, sha, k, GOOD, s)
        assert isinstance(got, Error) and got.message == FOREIGN, got
    assert r.lrange(key + ":list", 0, -1) == [b"x"] and r.hgetall(key + ":hash") == {b"f": b"v"}
    # a state of one of the script's algorithms
    minute = 60 * SEC
    k = key + ":gcra"
    took = call(conn, "EVALSHA", sha, 1, k, "TAKE", "0", "gcra", "5", str(minute), "0", "1",
                "0", "0", "0")
    assert took[0] == -1
    before = r.get(k)
    got = sync(conn, sha, k, GOOD, s)
    assert isinstance(got, Error) and got.message == OTHER_STATE, got
    assert r.get(k) == before
    r.close()


def test_the_other_ops_on_a_sync_record(conn, sha, key, shift):
    before = synced_once(conn, sha, key, shift)
    minute = str(60 * SEC)
    lease = "00000000000000ab"
    for op, ls, g in (("TAKE", "0", ["gcra", "5", minute, "0", "1", "0", "0", "0"]),
                      ("PEEK", "0", ["token_bucket", "5", minute, "0", "1", "0", "0", "0"]),
                      ("TAKE", "0", ["fixed_window", "5", minute, "0", "1", "0", "0", "1"]),
                      ("REFUND", "0", ["gcra", "5", minute, "0", "1", "0", "0", "0"]),
                      ("ACQUIRE", lease, ["concurrency", "5", minute, "0", "1", "0", "0", "0"]),
                      ("RELEASE", lease, ["concurrency", "5", minute, "0", "0", "0", "0", "0"])):
        got = call(conn, "EVALSHA", sha, 1, key, op, ls, *g)
        assert isinstance(got, Error) and got.message == OTHER_STATE, (op, got)
        assert (call(conn, "GET", key), call(conn, "PEXPIRETIME", key)) == before
    # RESET deletes it, as any state of the script's
    assert call(conn, "EVALSHA", sha, 1, key, "RESET", "0") == 1
    assert call(conn, "EXISTS", key) == 0


def test_pttl_follows_the_expiry_rule(conn, sha, key):
    """PEXPIRETIME is the rule's moment exactly; PTTL lies below it (in generous
    bounds: no timing is asserted)."""
    config = ("gcra", 100, SEC, 100, 10 * SEC, 3)
    # a lease's end decides: 3 intervals (30 s) after the sync
    got = sync(conn, sha, key, config, (0, 0, 0, 10, 0, 0), at=False)
    assert got[2] == 100 * SCALE
    f = record(conn, key)
    assert expiry_ms(config, f) == ceil_div(f[5] + 30 * SEC, 10**6)
    check_expiry(conn, key, config, f)
    assert 0 < call(conn, "PTTL", key) <= 30001  # PXAT rounds up to the ms
    # a debt decides: 10000 units admitted, 10000 to refill at 100 a second (100 s)
    sync(conn, sha, key, config, (0, 1, 10000, 10000, 10 * SEC, 0), at=False)
    f = record(conn, key)
    assert f[2] <= (100 - 10000) * SCALE + 100 * SCALE  # the refill since: under a second
    back = f[3] + ceil_div((100 * SCALE - f[2]) * SEC, 100 * SCALE)
    assert back > max(f[5], f[10]) + 30 * SEC
    assert expiry_ms(config, f) == ceil_div(back, 10**6)
    check_expiry(conn, key, config, f)
    assert 30000 < call(conn, "PTTL", key) <= 100001


def test_a_record_whose_expiry_has_passed_is_dropped(conn, sha, key):
    got = sync(conn, sha, key, GOOD, (T0, 0, 1, 2, 0, 0))
    _, grants, _ = replay(GOOD, [(T0, 0, 1, 2, 0, 0)])
    assert got == grants[0]
    assert call(conn, "EXISTS", key) == 0


def test_a_record_of_another_limit_is_read_within_this_ones(conn, sha, key, shift):
    """A record written under a larger limit (a config reload) is read within this
    one's ranges, as quota.c's quota_central_clamp reads it: its budget, node 0's hold
    and rate cut to the smaller brim and rate (quota_replay keeps one limit a key, so
    the grant is worked out by hand below)."""
    big, small = ("gcra", 1000, SEC, 1000, SEC // 10, 3), ("gcra", 10, SEC, 10, SEC // 10, 3)
    t = T0 + shift
    assert isinstance(sync(conn, sha, key, big, (t, 0, 0, 100, SEC // 10, 0)), list)
    f = record(conn, key)
    assert f[2] == 1000 * SCALE and f[7] > 10 * SCALE  # node 0's hold: beyond small's brim
    got = sync(conn, sha, key, small, (t + 1, 1, 0, 100, SEC // 10, 0))
    g = record(conn, key)
    # clamped: remaining and node 0's hold to small's brim, its rate to small's rate
    assert g[2] == 10 * SCALE and g[7] == 10 * SCALE and g[8] == 10 * SCALE
    # 1 ns refills nothing; node 0's lease (hold 10 units) and node 2's static share
    # (3 units, rate 10/3 a second) leave no budget and no rate to node 1
    assert got == [0, 0, 10 * SCALE]


def test_a_record_out_of_every_range_is_read_within_them(conn, sha, key, shift):
    """Text no sync wrote, every field out of its range, is read as quota.c's
    quota_central_clamp reads a state: the nearest within the ranges (its debt at the
    script's floor, 2^53), and the sync goes on from there (worked out by hand)."""
    head = ["7", "-5", "-99999999999999999999", "99999999999999999999", "-1"]
    slot = ["-1", "99999999999999999999", "-3", "99999999999999999999", "70000"]
    call(conn, "SET", key, "sluice.lua/1 sync " + " ".join(head + slot * 16))
    now = T0 + shift
    got = sync(conn, sha, key, GOOD, (now, 0, 0, 1, 0, 0))
    # seen 1, first 0, remaining -2^53, anchor SL_TIME_MAX (so no refill), frac 0;
    # each slot synced at 0 with the largest demand (so long dead: cleared), hold 0,
    # GOOD's rate, a carry of a unit. Node 0 gives its unit back and, alone, gets the
    # whole rate and no budget.
    rate = 100 * SCALE
    assert got == [0, rate, -LUA_DEBT_MAX + SCALE]
    want = [1, 0, -LUA_DEBT_MAX + SCALE, TIME_MAX, 0, now, 2, 0, rate, 0]
    want += [0, 0, 0, 0, SCALE] * 15
    f = record(conn, key)
    assert f == want
    assert expiry_ms(GOOD, f) == ceil_div(TIME_MAX, 10**6)
    check_expiry(conn, key, GOOD, f)


# ---- the exact product ----

# Run after the script's definitions, in place of its dispatcher: ARGV holds cases
# of n, a's n limbs (24 bits each, least significant first), b, c, d; the answer,
# for each, the quotient's limbs and the remainder.
MULDIV = """
local muldiv = sync_section().muldiv
local out, i = {}, 1
while i <= #ARGV do
  local n, a = tonumber(ARGV[i]), {}
  for k = 1, n do a[k] = tonumber(ARGV[i + k]) end
  local b, c, d = tonumber(ARGV[i + n + 1]), tonumber(ARGV[i + n + 2]), tonumber(ARGV[i + n + 3])
  local q, r, wq = muldiv(a, b, c, d)
  local limbs = {}
  if wq then
    for k, l in ipairs(wq) do limbs[k] = l end
  else
    while q > 0 do -- a number below 2^53
      local l = math.fmod(q, 16777216)
      limbs[#limbs + 1] = l
      q = (q - l) / 16777216
    end
  end
  out[#out + 1] = #limbs
  for _, l in ipairs(limbs) do out[#out + 1] = l end
  out[#out + 1] = r
  i = i + n + 4
end
return out
"""


def limbs(x):
    out = []
    while x:
        out.append(x % 2**24)
        x >>= 24
    return out


def test_muldiv_is_exact(conn):
    """The script's floor((a * b + c) / d), a up to 2^64, b and c up to 2^53, d below
    2^53, through both of its paths (a double below 2^53, wide integers above) and both
    ways of dividing (a limb or a bit at a time), against Python's integers."""
    text = script_text()
    probe = text[:text.index("local out = main()")] + MULDIV
    rng = random.Random(7)
    edges_a = [0, 1, 2, 2**24 - 1, 2**24, 2**53 - 1, 2**53, 2**53 + 1, 2**62 - 1, 2**64 - 1]
    edges_b = [0, 1, 3, 2**26 + 1, 2**53 - 1, 2**53]
    edges_d = [1, 2, 3, 1000, 10**6, 2**29, 2**29 + 1, 2**52, 2**52 + 1, 2**53 - 1]
    cases = []
    for a in edges_a:
        for b in edges_b:
            for d in edges_d:
                cases.append((a, b, rng.choice([0, d - 1, min(2**53, rng.randrange(d))]), d))
    for _ in range(2000):
        d = rng.choice([rng.randrange(1, 2**k + 1) for k in (3, 29, 30, 52, 53)])
        d = min(d, 2**53 - 1)
        cases.append((rng.randrange(2**rng.choice([10, 40, 53, 62, 64])),
                      rng.randrange(2**rng.choice([10, 30, 53]) + 1), rng.randrange(d), d))
    for k in range(0, len(cases), 500):
        batch = cases[k:k + 500]
        args = []
        for a, b, c, d in batch:
            args += [len(limbs(a))] + limbs(a) + [b, c, d]
        got = call(conn, "EVAL", probe, 0, *[str(x) for x in args])
        assert not isinstance(got, Error), got
        at = 0
        for a, b, c, d in batch:
            n = got[at]
            q = sum(l << (24 * i) for i, l in enumerate(got[at + 1:at + 1 + n]))
            r = got[at + 1 + n]
            at += n + 2
            assert (q, r) == divmod(a * b + c, d), (a, b, c, d)


# ---- 6. a stress near the ranges' tops ----

STRESS = [
    ("gcra", LUA_UNITS_MAX, 2**52, LUA_UNITS_MAX, 2**50, 16),
    ("token_bucket", LUA_UNITS_MAX, LUA_SPAN_MAX, 0, LUA_SPAN_MAX, 5),
    ("leaky_bucket", 1, 2**52, 1, 2**40, 3),
    ("gcra", 123456789, 999999937, LUA_UNITS_MAX, SEC, 7),
    ("gcra", LUA_UNITS_MAX, 1, LUA_UNITS_MAX, 1, 16),
    ("token_bucket", 3, 2**52 - 12345, 2**36, 2**45, 2),
]


@pytest.mark.parametrize("seed", range(len(STRESS)))
def test_stress_against_quota_replay(conn, sha, key, shift, seed):
    """600 random syncs a config, with spans from 0 to 2^58 ns, counts up to the
    script's tops and debts down to its floor (each admitted count is kept within what
    leaves the debt above 2^53, read from the C's answer before it): every grant, every
    record and its expiry equal the C's."""
    config = STRESS[seed]
    _, limit, period, burst, interval, nodes = config
    brim = (burst or limit) * SCALE
    rng = random.Random(seed)
    oracle = Replay(config)
    t = T0 + shift + rng.randrange(SEC)
    remaining, f = brim, [0] * 85
    try:
        for step in range(600):
            dt = rng.choice([0, 1, rng.randrange(interval + 1), interval, 3 * interval,
                             rng.randrange(2**20), rng.randrange(2**40), rng.randrange(2**53)])
            if rng.random() < 0.02:
                dt = rng.randrange(2**58)
            if rng.random() < 0.05:
                dt = -rng.randrange(interval + 1)
            t = min(max(T0 + shift, t + dt), TIME_MAX)
            node = rng.randrange(nodes)
            asked = rng.choice([0, 1, burst or limit, rng.randrange(UNITS_MAX + 1), UNITS_MAX])
            # the charge, admitted * SCALE + carry - the node's carry before, may take
            # the budget down to the script's floor and no further
            room = remaining + LUA_DEBT_MAX + f[9 + 5 * node]
            top = min(asked, LUA_UNITS_MAX, room // SCALE)
            admitted = rng.choice([0, top, rng.randrange(top + 1)])
            top = min(SCALE, room - admitted * SCALE)
            carry = rng.choice([0, top, rng.randrange(top + 1)])
            length = rng.choice([0, 1, interval, rng.randrange(LUA_SPAN_MAX + 1), LUA_SPAN_MAX])
            s = (t, node, admitted, asked, length, carry)
            want = oracle.sync(s)
            got = sync(conn, sha, key, config, s)
            assert got == want, (step, s)
            remaining = want[2]
            assert remaining >= -LUA_DEBT_MAX
            f = record(conn, key)
            assert f == oracle.state(), (step, s)
            check_expiry(conn, key, config, f)
    finally:
        oracle.close()


SPANS = [2**53 - 2, 2**53 - 1, 2**53, 2**53 + 1, 9007198 * SEC - 1, 9007198 * SEC,
         9007199 * SEC - 1, 9007199 * SEC, 9007199 * SEC + 1, 9007200 * SEC - 1]


@pytest.mark.parametrize("interval", [2**53 - 1, 2**53 - 2, 9007199 * SEC, 3 * 10**15])
def test_spans_around_2_53(conn, sha, key, shift, interval):
    """Spans between syncs where the script's spans turn from doubles into wide
    integers (2^53 ns, and 9007198 s, where it stops forming them as doubles), against
    intervals and leases on either side: the same grants and record as the C."""
    config = ("gcra", 1000, 2**52 + 1, 5000, interval, 4)
    t = T0 + shift
    syncs = [(t, 0, 0, 10, 0, 0)]
    for i, gap in enumerate(SPANS * 2):
        t += gap if i % 3 else 1
        syncs.append((t, i % 4, 1, 3, min(gap, LUA_SPAN_MAX), i % 2 * SCALE))
    _, grants, state = replay(config, syncs)
    for i, s in enumerate(syncs):
        assert sync(conn, sha, key, config, s) == grants[i], (i, s)
    f = record(conn, key)
    assert f == state
    check_expiry(conn, key, config, f)


def test_the_debt_floor(conn, sha, key, shift):
    """The one place where the script answers otherwise than the C: a debt deeper than
    2^53 sub-units is recorded as 2^53 (the C records down to 2^61)."""
    config = ("gcra", LUA_UNITS_MAX, SEC, LUA_UNITS_MAX, SEC, 1)
    t = T0 + shift
    syncs = [(t, 0, LUA_UNITS_MAX, LUA_UNITS_MAX, SEC, 0),
             (t, 0, LUA_UNITS_MAX, LUA_UNITS_MAX, SEC, 0),
             (t, 0, LUA_UNITS_MAX, LUA_UNITS_MAX, SEC, 0)]
    _, grants, _ = replay(config, syncs)
    got = [sync(conn, sha, key, config, s) for s in syncs]
    assert got[:2] == grants[:2] and got[1][2] == -(LUA_UNITS_MAX * SCALE)
    assert grants[2][2] < -LUA_DEBT_MAX
    assert got[2][:2] == grants[2][:2] and got[2][2] == -LUA_DEBT_MAX
    assert record(conn, key)[2] == -LUA_DEBT_MAX


def test_claim_hands_out_the_lowest_free_id_and_renews_it(plain, sha, key):
    r = plain.client()

    def claim(token, ttl=5000):
        return r.evalsha(sha, 1, key, "CLAIM", "0", token, str(ttl))

    assert claim("a") == [0, 1]
    assert claim("b") == [1, 2]
    assert claim("a") == [0, 2]           # its own id, renewed
    assert claim("c", ttl=1) == [2, 3]
    # A 1 ms claim lapses: its id is the next newcomer's (the lowest free one).
    def lapsed():
        sec, us = r.time()
        return int(r.hget(key, "2").split()[1]) < sec * 1000 + us // 1000

    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and not lapsed():
        time.sleep(0.01)
    assert claim("d") == [2, 3]           # the id c held
    assert r.hget(key, "2").split()[0] == b"d"
    for i in range(3, 16):
        assert claim("t%d" % i)[0] == i
    assert claim("late") == [-1, 16]      # every id held by another token
    assert 0 < r.pttl(key) <= 10000       # twice the ttl without a claim
    r.close()


@pytest.mark.parametrize("args,why", [
    (["CLAIM", "0", "", "5000"], "token is 1 to 64 bytes"),
    (["CLAIM", "0", "a b", "5000"], "token is 1 to 64 bytes"),
    (["CLAIM", "0", "x" * 65, "5000"], "token is 1 to 64 bytes"),
    (["CLAIM", "0", "a", "0"], "ttl_ms must be an integer from 1 to 99999999"),
    (["CLAIM", "0", "a", "1e3"], "ttl_ms must be an integer from 1 to 99999999"),
    (["CLAIM", "0", "a"], "wrong number of arguments for CLAIM"),
])
def test_claim_refuses_bad_arguments_saying_which(plain, sha, key, args, why):
    r = plain.client()
    with pytest.raises(Exception) as e:
        r.evalsha(sha, 1, key, *args)
    assert why in str(e.value)
    assert r.exists(key) == 0
    r.close()
