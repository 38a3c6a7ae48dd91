"""The central store's Lua script (src/backend/lua/sluice.lua) against the module's
SL.DECIDE, side by side on one real redis-server: the same arguments, once as
SL.DECIDE on one key and once as EVALSHA of the script on another, must give the same
answer (durations at millisecond resolution). And the script alone, on a Redis
without the module."""

import os
import random
import re
import time
import uuid

import pytest

import command_cases
from conftest import ROOT
from respclient import Error

SCRIPT = os.path.join(ROOT, "src", "backend", "lua", "sluice.lua")
NS = {"ms": 10**6, "s": 10**9, "m": 60 * 10**9, "h": 3600 * 10**9, "d": 86400 * 10**9,
      "w": 7 * 86400 * 10**9}
MONTH_NS = 2629746000000000  # sluice.h's SL_MONTH_NS: a period of "1mo"
# Durations of the two answers may differ by the time between the two calls (a
# comparison of decisions, not of timing): a few ms on a loaded machine.
SLACK_NS = 50 * 10**6


def script_text():
    with open(SCRIPT) as f:
        return f.read()


@pytest.fixture(scope="module")
def sha(server):
    c = server.client()
    s = c.script_load(script_text())
    c.close()
    return s


@pytest.fixture
def conn(server):
    c = server.conn()
    yield c
    c.close()


def call(c, *args):
    c.send_command(*args)
    return c.read_reply()


def group(algorithm, a, b, c, cost, months=0, offset=0, flags=0):
    return [algorithm, a, b, c, cost, months, offset, flags]


def both(c, sha, op, lease, keys, groups, suffix=(":m", ":l")):
    """Sends op on keys + suffix[0] as SL.DECIDE and on keys + suffix[1] through the
    script; returns the two replies."""
    flat = [str(x) for g in groups for x in g]
    mk = [k + suffix[0] for k in keys]
    lk = [k + suffix[1] for k in keys]
    mod = call(c, "SL.DECIDE", op, lease, len(mk), *mk, *flat)
    lua = call(c, "EVALSHA", sha, len(lk), *lk, op, lease, *flat)
    return mod, lua


def same(mod, lua, where="", remaining_slack=0):
    """The module's answer and the script's agree: errors word for word, integers
    exactly, a decision array exactly but for its durations (retry, reset, delay),
    which agree to the slack. Where a state's remaining grows with the time
    between the two calls (a fast rate read after a slow one), remaining_slack
    lets it differ by that many."""
    if isinstance(mod, Error) or isinstance(lua, Error):
        assert isinstance(mod, Error) and isinstance(lua, Error) and \
            mod.message == lua.message, (where, mod, lua)
        return
    if not isinstance(mod, list):
        assert mod == lua, (where, mod, lua)
        return
    assert isinstance(lua, list) and len(mod) == len(lua), (where, mod, lua)
    assert mod[0] == lua[0], (where, "failed", mod, lua)
    for k in range(1, len(mod), 6):
        m, l = mod[k:k + 6], lua[k:k + 6]
        assert m[:2] == l[:2], (where, "allowed/limit", mod, lua)
        assert abs(m[2] - l[2]) <= remaining_slack, (where, "remaining", mod, lua)
        for i in (3, 4, 5):
            if m[i] == -1 or l[i] == -1:
                assert m[i] == l[i], (where, i, mod, lua)
            else:
                assert abs(m[i] - l[i]) <= SLACK_NS, (where, i, mod, lua)


# ---- the shared table of command cases, as SL.DECIDE ----

class Untranslatable(Exception):
    """A step that the high-level command's own parser refuses: SL.DECIDE has no
    words for it (BURST 0 means the limit there, not an error)."""


def period_ns(text):
    m = re.fullmatch(r"(\d+)(ms|s|m|h|d|w|mo)?", text, re.I)
    if not m or int(m.group(1)) == 0:
        raise Untranslatable(text)
    unit = (m.group(2) or "s").lower()
    if unit == "mo":
        return int(m.group(1)) * MONTH_NS, int(m.group(1))
    return int(m.group(1)) * NS[unit], 0


def utc_offset_ns(text):
    m = re.fullmatch(r"([+-])(\d\d):?(\d\d)?", text)
    if text == "Z":
        return 0
    if not m:
        raise Untranslatable(text)
    ns = (int(m.group(2)) * 3600 + int(m.group(3) or 0) * 60) * 10**9
    return -ns if m.group(1) == "-" else ns


def limit_group(args, peek_cost=1):
    """limit period [BURST b] [COST c] [ALGORITHM a] [UTCOFFSET o] -> a group."""
    if len(args) < 2:
        raise Untranslatable(args)
    period, months = period_ns(args[1])
    opts = {}
    for i in range(2, len(args), 2):
        name = args[i].upper()
        if name in opts or i + 1 >= len(args) or \
                name not in ("BURST", "COST", "ALGORITHM", "UTCOFFSET"):
            raise Untranslatable(args)
        opts[name] = args[i + 1]
    if "BURST" in opts and not (opts["BURST"].isdigit() and int(opts["BURST"]) >= 1):
        raise Untranslatable(args)
    algo = opts.get("ALGORITHM", "gcra")
    if algo.lower() not in ("gcra", "token_bucket", "leaky_bucket", "fixed_window",
                            "sliding_log", "sliding_window"):
        raise Untranslatable(args)
    off = utc_offset_ns(opts["UTCOFFSET"]) if "UTCOFFSET" in opts else 0
    return group(algo, args[0], period, opts.get("BURST", 0), opts.get("COST", peek_cost),
                 months, off)


def translate(argv, leases):
    """(op, lease, keys, groups) of SL.DECIDE for a step of the table."""
    cmd, rest = argv[0].upper(), argv[1:]
    if cmd == "CL.THROTTLE" and len(rest) in (4, 5):
        return "TAKE", "0", [rest[0]], [group("cell", *rest[1:4], rest[4] if len(rest) > 4 else 1)]
    if cmd in ("SL.TAKE", "SL.PEEK") and len(rest) >= 3 and rest[0]:
        return cmd[3:], "0", [rest[0]], [limit_group(rest[1:])]
    if cmd == "SL.TAKEMANY" and rest and rest[0].isdigit():
        n = int(rest[0])
        keys, specs = rest[1:1 + n], rest[1 + n:]
        if n < 1 or len(keys) != n or not specs or specs[0].upper() != "LIMIT":
            raise Untranslatable(argv)
        groups, cur = [], None
        for a in specs:
            if a.upper() == "LIMIT":
                cur = []
                groups.append(cur)
            else:
                cur.append(a)
        if len(groups) != n:
            raise Untranslatable(argv)
        return "TAKE", "0", keys, [limit_group(g) for g in groups]
    if cmd == "SL.RESET" and rest:
        return "RESET", "0", rest, []
    if cmd == "SL.ACQUIRE" and len(rest) in (3, 5):
        weight = rest[4] if len(rest) == 5 and rest[3].upper() == "WEIGHT" else "1"
        if not (rest[1].isdigit() and rest[2].isdigit() and weight.isdigit()) or \
                int(rest[1]) < 1 or int(rest[2]) < 1 or int(weight) > int(rest[1]):
            raise Untranslatable(argv)
        lease = "%016x" % random.getrandbits(64)
        g = group("concurrency", rest[1], int(rest[2]) * 10**6, 0, weight)
        leases[rest[0]] = (lease, g)
        return "ACQUIRE", lease, [rest[0]], [g]
    if cmd == "SL.RELEASE" and len(rest) == 2 and rest[0] in leases:
        lease, g = leases[rest[0]]
        if rest[1] != "LEASE":
            raise Untranslatable(argv)
        return "RELEASE", lease, [rest[0]], [g[:4] + [0] + g[5:]]
    raise Untranslatable(argv)


def _steps(steps):
    out, leases = [], {}
    for argv, _ in steps:
        args = [a if a in (command_cases.K, command_cases.K2) else
                ("LEASE" if a == command_cases.LEASE else str(a)) for a in argv]
        try:
            out.append(translate(args, leases))
        except Untranslatable:
            pass
    return out


DECIDE_CASES = [(n, s) for n, s in command_cases.CASES if _steps(s)]


def test_the_table_is_covered():
    names = {n for n, _ in DECIDE_CASES}
    assert {"cell_readme", "take_cost", "leaky_bucket_delays", "takemany_all_or_nothing",
            "takemany_repeated_key_adds_up_when_rejected", "reset_forgets", "leases",
            "take_one_state_per_key", "algorithm_sliding_window_admits_its_limit",
            "bad_arguments"} <= names, names


@pytest.mark.parametrize("name,steps", DECIDE_CASES, ids=[n for n, _ in DECIDE_CASES])
def test_table_case(conn, sha, name, steps):
    k1, k2 = command_cases.keys_for(name, uuid.uuid4().hex[:8])
    for i, (op, lease, keys, groups) in enumerate(_steps(steps)):
        keys = [k1 if k == command_cases.K else k2 if k == command_cases.K2 else k
                for k in keys]
        mod, lua = both(conn, sha, op, lease, keys, groups)
        same(mod, lua, "%s step %d: %s %s" % (name, i, op, groups))


# ---- random traces, decision by decision ----

TRACE_LIMITS = {
    "gcra": [(5, 3600, 0), (7, 3600, 3), (100, 3600, 0)],
    "leaky_bucket": [(5, 3600, 0), (7, 3600, 3)],
    "token_bucket": [(5, 3600, 0), (7, 3600, 3), (1024, 3600, 0)],
    "fixed_window": [(5, 3600, 0), (100, 86400, 0)],
    "sliding_window": [(5, 3600, 0), (100, 86400, 0)],
    "sliding_log": [(5, 3600, 0), (100, 86400, 0)],
    "cell": [(4, 5, 3600), (9, 10, 60)],
}


@pytest.mark.parametrize("algo", sorted(TRACE_LIMITS))
@pytest.mark.parametrize("carried", [0, 1], ids=["adhoc", "carried"])
def test_random_trace(conn, sha, algo, carried):
    """Random costs, takes and peeks on a fresh module key and a fresh script key,
    one call after the other: the same decision each time."""
    if algo == "cell" and carried:
        pytest.skip("redis-cell's limits are never carried")
    rnd = random.Random("%s-%d" % (algo, carried))
    for a, b, c in TRACE_LIMITS[algo]:
        key = "trace:%s:%s" % (algo, uuid.uuid4().hex[:8])
        for step in range(60):
            cost = rnd.choice([0, 1, 1, 1, 2, 3, 9, 120])
            op = rnd.choice(["TAKE", "TAKE", "TAKE", "PEEK"])
            if algo == "cell":
                g = group("cell", a, b, c, cost)
            else:
                g = group(algo, a, b * 10**9, c, cost, flags=carried)
            mod, lua = both(conn, sha, op, "0", [key], [g])
            same(mod, lua, "%s step %d %s %s" % (algo, step, op, g))


@pytest.mark.parametrize("algo", ["fixed_window", "sliding_window"])
@pytest.mark.parametrize("months,offset,period", [
    (0, 0, 86400), (0, -5 * 3600, 86400), (0, 5 * 3600 + 1800, 7 * 86400), (0, 9 * 3600, 7 * 3600),
    (1, 0, 0), (1, -3 * 3600 - 1800, 0), (3, 2 * 3600, 0), (12, 0, 0)])
def test_windows_on_the_calendar(conn, sha, algo, months, offset, period):
    """Windows where the module puts them: at the UTC offset, weeks from Monday,
    periods that do not divide a day counted from Monday 1970-01-05, calendar months."""
    key = "cal:%s" % uuid.uuid4().hex[:8]
    p = months * MONTH_NS if months else period * 10**9
    for cost in (1, 2, 0, 5):
        mod, lua = both(conn, sha, "TAKE", "0", [key], [group(algo, 3, p, 0, cost, months,
                                                               offset * 10**9)])
        same(mod, lua, (algo, months, offset, cost))


DAY = 256  # a group's flags: the reset day times 256, plus 1 when carried


@pytest.mark.parametrize("algo", ["fixed_window", "sliding_window"])
@pytest.mark.parametrize("months,offset", [(1, 0), (1, -5 * 3600), (1, 14 * 3600), (3, 0),
                                           (12, 5 * 3600 + 1800)])
@pytest.mark.parametrize("carried", [0, 1], ids=["adhoc", "carried"])
def test_reset_days_on_the_calendar(conn, sha, algo, months, offset, carried):
    """Windows of months from every reset day where the module puts them: whatever
    today is, some days are yet to come this month (the cycle began last month), some
    have passed, and 29 to 31 fall on a shorter month's last day."""
    p = months * MONTH_NS
    for day in range(1, 32):
        key = "day:%s" % uuid.uuid4().hex[:8]
        g = group(algo, 3, p, 0, 1, months, offset * 10**9, day * DAY + carried)
        for cost in (1, 0, 2):
            mod, lua = both(conn, sha, "TAKE", "0", [key], [g[:4] + [cost] + g[5:]])
            same(mod, lua, (algo, months, offset, day, cost))
        assert mod[1] == 1 and mod[5] > 0, mod  # admitted, a window to wait out


def test_random_trace_of_reset_days(conn, sha):
    """One key taken from and peeked at under limits of months whose reset day, months
    and offset change from step to step (a state read under another day's windows, as
    after a reload that moves the day): the module and the script decide alike."""
    rnd = random.Random("reset-day")
    for algo in ("fixed_window", "sliding_window"):
        for carried in (0, 1):
            key = "dtrace:%s:%s" % (algo, uuid.uuid4().hex[:8])
            for step in range(80):
                months = rnd.choice([1, 1, 1, 2, 3, 12])
                day = rnd.choice([0, 1, 2, 14, 15, 28, 29, 30, 31])
                offset = rnd.choice([0, -5 * 3600, 9 * 3600, 14 * 3600]) * 10**9
                cost = rnd.choice([0, 1, 1, 2, 5])
                op = rnd.choice(["TAKE", "TAKE", "PEEK"])
                g = group(algo, 20, months * MONTH_NS, 0, cost, months, offset,
                          day * DAY + carried)
                mod, lua = both(conn, sha, op, "0", [key], [g])
                same(mod, lua, "%s step %d %s %s" % (algo, step, op, g))


def test_short_periods_as_time_passes(conn, sha):
    """Refills, window turns, log entries leaving and expiry, under real (short) time
    steps. The two calls of a step are a fraction of a millisecond apart (more on a
    loaded machine), so a unit that comes back, or a window that turns, between them
    can make one answer differ now and then: few may."""
    rnd = random.Random(7)
    algos = ("gcra", "token_bucket", "fixed_window", "sliding_window", "sliding_log",
             "leaky_bucket")
    keys = {a: "short:%s:%s" % (a, uuid.uuid4().hex[:8]) for a in algos}
    steps = differ = 0
    for step in range(15):
        for algo, key in keys.items():
            g = group(algo, 3, 10**9, 0, rnd.choice([0, 1, 1, 2]))
            mod, lua = both(conn, sha, "TAKE", "0", [key], [g])
            steps += 1
            try:
                same(mod, lua, (step, algo))
            except AssertionError:
                differ += 1
        time.sleep(rnd.choice([0.05, 0.15, 0.35, 0.6]))
    assert differ <= steps // 10, (differ, steps)


# ---- leases ----

def test_leases_side_by_side(server, conn, sha):
    key = "lease:%s" % uuid.uuid4().hex[:8]
    ids = ["%016x" % (0xa1b2c3d400000000 + i) for i in range(6)]
    g = lambda w: group("concurrency", 3, 1000 * 10**6, 0, w)  # a TTL of 1 s
    for lease, w in zip(ids, (1, 2, 1)):  # to full, then one too many
        mod, lua = both(conn, sha, "ACQUIRE", lease, [key], [g(w)])
        same(mod, lua, ("acquire", lease, w))
    assert mod[:4] == [0, 0, 3, 0] and lua[:4] == [0, 0, 3, 0], (mod, lua)
    # the same id twice is refused, in the module's words
    same(*both(conn, sha, "ACQUIRE", ids[0], [key], [g(1)]), where="dup")
    assert isinstance(call(conn, "EVALSHA", sha, 1, key + ":l", "ACQUIRE", ids[0],
                           *map(str, g(1))), Error)
    # release: 1 once, then 0
    for want in (1, 0):
        mod, lua = both(conn, sha, "RELEASE", ids[1], [key], [g(0)])
        assert mod == lua == want, (mod, lua)
    mod, lua = both(conn, sha, "ACQUIRE", ids[3], [key], [g(2)])
    same(mod, lua, "after release")
    assert mod[:3] == lua[:3] == [-1, 1, 3]
    # leases expire by themselves
    time.sleep(1.2)
    mod, lua = both(conn, sha, "ACQUIRE", ids[4], [key], [g(3)])
    same(mod, lua, "after expiry")
    assert lua[:4] == [-1, 1, 3, 0], lua
    mod, lua = both(conn, sha, "RELEASE", ids[0], [key], [g(0)])
    assert mod == lua == 0  # expired


# ---- all or nothing ----

def test_take_over_three_keys_is_all_or_nothing(conn, sha):
    base = "aon:%s" % uuid.uuid4().hex[:8]
    keys = [base + ":1", base + ":2", base + ":3"]
    gs = [group("gcra", 5, 3600 * 10**9, 0, 1), group("token_bucket", 1, 3600 * 10**9, 0, 1),
          group("fixed_window", 5, 3600 * 10**9, 0, 1)]
    same(*both(conn, sha, "TAKE", "0", keys, gs), where="first")
    mod, lua = both(conn, sha, "TAKE", "0", keys, gs)
    same(mod, lua, "second")
    assert lua[0] == 1 and lua[1:4] == [1, 5, 3], lua  # refused by the second key
    # nothing was consumed from the first and third
    peek = [g[:4] + [0] + g[5:] for g in gs]
    mod, lua = both(conn, sha, "PEEK", "0", keys, peek)
    same(mod, lua, "peek")
    assert [lua[3], lua[9], lua[15]] == [4, 0, 4], lua


# ---- carried limits ----

@pytest.mark.parametrize("algo", ["gcra", "token_bucket", "fixed_window", "sliding_window",
                                  "sliding_log"])
def test_carry_across_a_tier_change(conn, sha, algo):
    """100 takes under 100 a minute, then the key's tier becomes 10 000 a minute:
    the 100 units used stay used, 9 900 are left."""
    key = "tier:%s:%s" % (algo, uuid.uuid4().hex[:8])
    minute = 60 * 10**9
    free, paid = group(algo, 100, minute, 0, 1, flags=1), group(algo, 10000, minute, 0, 0, flags=1)
    # pipelined, so that all 100 land well within the 0.6 s a unit takes to come back
    flat = [str(x) for x in free]
    for i in range(100):
        conn.send_command("SL.DECIDE", "TAKE", "0", 1, key + ":m", *flat)
    mod = [conn.read_reply() for _ in range(100)][-1]
    for i in range(100):
        conn.send_command("EVALSHA", sha, 1, key + ":l", "TAKE", "0", *flat)
    lua = [conn.read_reply() for _ in range(100)][-1]
    assert mod[1:4] == lua[1:4] == [1, 100, 0], (mod, lua)
    mod, lua = both(conn, sha, "PEEK", "0", [key], [paid])
    same(mod, lua, "peek at the new tier")
    assert lua[3] == 9900, lua
    mod, lua = both(conn, sha, "TAKE", "0", [key], [paid[:4] + [1] + paid[5:]])
    same(mod, lua, "take at the new tier")
    assert lua[1:4] == [1, 10000, 9899], lua


def test_an_adhoc_limit_reads_the_time_not_the_units(conn, sha):
    """Without the carry flag a state is read under whatever limit comes, as
    redis-cell reads it: a debt of a minute is still a minute at another rate."""
    key = "adhoc:%s" % uuid.uuid4().hex[:8]
    minute = 60 * 10**9
    for _ in range(100):
        both(conn, sha, "TAKE", "0", [key], [group("gcra", 100, minute, 0, 1)])
    mod, lua = both(conn, sha, "PEEK", "0", [key], [group("gcra", 10000, minute, 0, 0)])
    # At 10000 a minute a token is 6 ms: the two states, made apart by the
    # round trips between the calls (up to the slack on a busy machine),
    # differ by as many tokens as fit in that time, and one for the edge.
    same(mod, lua, "adhoc", remaining_slack=SLACK_NS // (minute // 10000) + 1)
    assert lua[3] < 10, lua


# ---- WRONGTYPE ----

def test_wrongtype(server, conn, sha):
    r = server.client()
    base = "wt:%s" % uuid.uuid4().hex[:8]
    minute = 60 * 10**9
    # a value that is not a state of the script's (nor of the module's)
    r.set(base + ":s:m", "hello")
    r.set(base + ":s:l", "hello")
    r.rpush(base + ":list:m", "x")
    r.rpush(base + ":list:l", "x")
    for k in (base + ":s", base + ":list"):
        for op, g in (("TAKE", [group("gcra", 5, minute, 0, 1)]), ("PEEK", [group("gcra", 5, minute, 0, 1)]),
                      ("RESET", [])):
            mod, lua = both(conn, sha, op, "0", [k], g)
            same(mod, lua, (k, op))
            assert isinstance(lua, Error) and lua.message.startswith("WRONGTYPE"), lua
    assert r.get(base + ":s:l") == b"hello" and r.lrange(base + ":list:l", 0, -1) == [b"x"]
    # an ad-hoc limit of another algorithm than the key's state
    k = base + ":algo"
    both(conn, sha, "TAKE", "0", [k], [group("gcra", 5, minute, 0, 1)])
    before = r.get(k + ":l")
    mod, lua = both(conn, sha, "TAKE", "0", [k], [group("token_bucket", 5, minute, 0, 1)])
    same(mod, lua, "other algorithm")
    assert lua.message.startswith("WRONGTYPE key holds a state of another algorithm"), lua
    assert r.get(k + ":l") == before
    # a policy's (carried) limit carries another algorithm's units over instead
    lua = call(conn, "EVALSHA", sha, 1, k + ":l", "PEEK", "0",
               *map(str, group("token_bucket", 5, minute, 0, 0, flags=1)))
    assert lua[:4] == [-1, 1, 5, 4], lua
    # the module's states and the script's are strangers to each other
    mod = call(conn, "SL.DECIDE", "PEEK", "0", 1, k + ":l", *map(str, group("gcra", 5, minute, 0, 0)))
    lua = call(conn, "EVALSHA", sha, 1, k + ":m", "PEEK", "0", *map(str, group("gcra", 5, minute, 0, 0)))
    assert mod.message == lua.message == "WRONGTYPE Operation against a key holding the wrong kind of value"
    r.close()


# ---- bad arguments ----

M = 60 * 10**9
BAD = [
    ("NOPE", "0", ["k"], [group("gcra", 5, M, 0, 1)]),
    ("TAKE", "1", ["k"], [group("gcra", 5, M, 0, 1)]),
    ("ACQUIRE", "0", ["k"], [group("concurrency", 5, M, 0, 1)]),
    ("ACQUIRE", "0000000000000000", ["k"], [group("concurrency", 5, M, 0, 1)]),
    ("ACQUIRE", "00000000000000zz", ["k"], [group("concurrency", 5, M, 0, 1)]),
    ("ACQUIRE", "000000000000001", ["k"], [group("concurrency", 5, M, 0, 1)]),
    ("TAKE", "0", [], []),
    ("TAKE", "0", ["k%d" % i for i in range(9)], [group("gcra", 5, M, 0, 1)] * 9),
    ("ACQUIRE", "00000000000000ab", ["k", "k2"], [group("concurrency", 5, M, 0, 1)] * 2),
    ("TAKE", "0", ["k"], [group("gcra", 5, M, 0, 1)[:7]]),
    ("TAKE", "0", ["k"], [group("gcra", "x", M, 0, 1)]),
    ("TAKE", "0", ["k"], [group("gcra", 5, M, 0, "1.5")]),
    ("TAKE", "0", ["k"], [group("gcra", 5, M, 0, "99999999999999999999")]),
    ("TAKE", "0", ["k"], [group("nope", 5, M, 0, 1)]),
    ("TAKE", "0", ["k"], [group("gcra", 5, M, 0, -1)]),
    ("TAKE", "0", ["k"], [group("gcra", 5, M, 0, 1, flags=2)]),
    ("TAKE", "0", ["k"], [group("cell", 4, 5, 60, 1, months=1)]),
    ("TAKE", "0", ["k"], [group("gcra", 0, M, 0, 1)]),
    ("TAKE", "0", ["k"], [group("gcra", "2305843009213693952", M, 0, 1)]),
    ("TAKE", "0", ["k"], [group("gcra", 5, 0, 0, 1)]),
    ("TAKE", "0", ["k"], [group("gcra", 5, M, -1, 1)]),
    ("TAKE", "0", ["k"], [group("gcra", 1, "2305843009213693951", 2, 1)]),
    ("TAKE", "0", ["k"], [group("sliding_log", 65537, M, 0, 1)]),
    ("TAKE", "0", ["k"], [group("fixed_window", 5, M, 0, 1, months=877)]),
    ("TAKE", "0", ["k"], [group("fixed_window", 5, M, 0, 1, offset=19 * 3600 * 10**9)]),
    ("TAKE", "0", ["k"], [group("sliding_log", 5, M, 0, 1, months=1)]),
    ("TAKE", "0", ["k"], [group("cell", 4, 0, 60, 1)]),
    ("TAKE", "0", ["k"], [group("cell", -1, 5, 60, 1)]),
    ("TAKE", "0", ["k"], [group("cell", 1, 5, 0, 1)]),
    ("TAKE", "0", ["k"], [group("cell", 1, 2000000, 1, 1)]),
    ("TAKE", "0", ["k"], [group("cell", 1, 5, 60, 1, flags=1)]),
    ("TAKE", "0", ["k"], [group("concurrency", 5, M, 0, 1)]),
    ("PEEK", "0", ["k"], [group("concurrency", 5, M, 0, 1)]),
    ("ACQUIRE", "00000000000000ab", ["k"], [group("gcra", 5, M, 0, 1)]),
    ("ACQUIRE", "00000000000000ab", ["k"], [group("concurrency", 5, M, 0, 0)]),
    ("ACQUIRE", "00000000000000ab", ["k"], [group("concurrency", 5, M, 0, 6)]),
    ("ACQUIRE", "00000000000000ab", ["k"], [group("concurrency", 5, M, 0, 1, flags=1)]),
    ("TAKE", "0", [""], [group("gcra", 5, M, 0, 1)]),
    ("RESET", "0", [""], []),
    ("TAKE", "0", ["k", "k"], [group("gcra", 5, M, 0, 1), group("token_bucket", 5, M, 0, 1)]),
    ("TAKE", "0", ["k", "k2"], [group("gcra", 5, M, 0, 1), group("gcra", 0, M, 0, 1)]),
]


@pytest.mark.parametrize("op,lease,keys,groups", BAD, ids=range(len(BAD)))
def test_bad_arguments(server, conn, sha, op, lease, keys, groups):
    """Refused with the module's words, and nothing written."""
    base = "bad:%s:" % uuid.uuid4().hex[:8]
    keys = [base + k if k else "" for k in keys]
    mod, lua = both(conn, sha, op, lease, keys, groups, suffix=("", "") if "" in keys else (":m", ":l"))
    assert isinstance(mod, Error), mod
    same(mod, lua, (op, lease, groups))
    r = server.client()
    assert r.keys(base + "*") == []
    r.close()


BAD_DAYS = [
    ("TAKE", "0", ["k"], [group("fixed_window", 5, MONTH_NS, 0, 1, 1, 0, 32 * 256)]),
    ("TAKE", "0", ["k"], [group("fixed_window", 5, MONTH_NS, 0, 1, 1, 0, 15 * 256 + 2)]),
    ("TAKE", "0", ["k"], [group("fixed_window", 5, MONTH_NS, 0, 1, 1, 0, -256)]),
    ("TAKE", "0", ["k"], [group("fixed_window", 5, M, 0, 1, 0, 0, 15 * 256)]),
    ("TAKE", "0", ["k"], [group("fixed_window", 5, MONTH_NS, 0, 1, 877, 0, 15 * 256)]),
    ("TAKE", "0", ["k"], [group("sliding_log", 5, MONTH_NS, 0, 1, 1, 0, 15 * 256)]),
    ("TAKE", "0", ["k"], [group("cell", 4, 5, 60, 1, 0, 0, 15 * 256)]),
    ("TAKE", "0", ["k"], [group("concurrency", 5, M, 0, 1, 0, 0, 2 * 256 + 1)]),
]


@pytest.mark.parametrize("op,lease,keys,groups", BAD_DAYS, ids=range(len(BAD_DAYS)))
def test_bad_reset_days(server, conn, sha, op, lease, keys, groups):
    """A reset day out of range, beside other flags, for a period of no months, or for
    redis-cell: refused with the module's words, and nothing written."""
    base = "badday:%s:" % uuid.uuid4().hex[:8]
    keys = [base + k for k in keys]
    mod, lua = both(conn, sha, op, lease, keys, groups)
    assert isinstance(mod, Error), mod
    same(mod, lua, (op, groups))
    r = server.client()
    assert r.keys(base + "*") == []
    r.close()


# ---- expiry and the value ----

def test_keys_expire_when_never_seen_again(server, conn, sha):
    r = server.client()
    key = "exp:%s" % uuid.uuid4().hex[:8]
    for algo in ("gcra", "token_bucket", "fixed_window", "sliding_window", "sliding_log",
                 "leaky_bucket"):
        k = key + algo
        both(conn, sha, "TAKE", "0", [k], [group(algo, 10, 3600 * 10**9, 0, 3)])
        m, l = r.pttl(k + ":m"), r.pttl(k + ":l")
        assert 0 < l and abs(m - l) <= 50, (algo, m, l)
        assert r.get(k + ":l").startswith(b"sluice.lua/1 " + algo.encode())
    # RESET deletes what was held
    mod, lua = both(conn, sha, "RESET", "0", [key + "gcra", key + "none"], [])
    assert mod == lua == 1
    r.close()


# ---- the script alone ----

def test_the_script_alone_on_a_redis_without_the_module(make_server):
    s = make_server("plain", module=False)
    r = s.client()
    assert not any(m.get(b"name") == b"sluice" for m in r.module_list())
    sha = r.script_load(script_text())
    minute = 60 * 10**9
    args = ["TAKE", "0"] + [str(x) for x in group("gcra", 10, minute, 0, 4)]
    assert r.evalsha(sha, 1, "a", *args) == [-1, 1, 10, 6, 0, 24 * 10**9, 0]
    got = r.evalsha(sha, 1, "a", *args[:6] + ["7"] + args[7:])
    assert got[:4] == [0, 0, 10, 6] and got[4] > 0, got
    assert 23000 < r.pttl("a") <= 24001  # PXAT rounds up to the millisecond
    # two keys, all or nothing; then a lease
    got = r.evalsha(sha, 2, "a", "b", "TAKE", "0",
                    *map(str, group("gcra", 10, minute, 0, 6) + group("cell", 4, 5, 60, 1)))
    assert got[0] == -1 and got[3] == 0 and got[7:11] == [1, 5, 4, 0], got
    lease = "00000000000000ab"
    assert r.evalsha(sha, 1, "c", "ACQUIRE", lease,
                     *map(str, group("concurrency", 1, minute, 0, 1)))[:2] == [-1, 1]
    assert r.evalsha(sha, 1, "c", "RELEASE", lease,
                     *map(str, group("concurrency", 1, minute, 0, 0))) == 1
    assert r.evalsha(sha, 2, "a", "b", "RESET", "0") == 2
    assert r.exists("a", "b", "c") == 0
    r.close()


# ---- more than one key, and keys read under other limits ----

def test_random_multi_key_takes(conn, sha):
    """TAKE over 1 to 4 keys drawn from a small pool (a key may repeat), each key
    with its own algorithm: all or nothing, the same answers, the same states
    (peeked afterwards)."""
    rnd = random.Random(11)
    base = "multi:%s:" % uuid.uuid4().hex[:8]
    pool = [(base + "g", "gcra", 5), (base + "t", "token_bucket", 4),
            (base + "f", "fixed_window", 6), (base + "w", "sliding_window", 5),
            (base + "s", "sliding_log", 4), (base + "q", "leaky_bucket", 3)]
    for step in range(80):
        picked = [rnd.choice(pool) for _ in range(rnd.randint(1, 4))]
        groups = [group(a, lim, 3600 * 10**9, 0, rnd.choice([0, 1, 1, 2])) for _, a, lim in picked]
        mod, lua = both(conn, sha, "TAKE", "0", [k for k, _, _ in picked], groups)
        same(mod, lua, (step, picked, groups))
    for k, a, lim in pool:
        same(*both(conn, sha, "PEEK", "0", [k], [group(a, lim, 3600 * 10**9, 0, 0)]), where=k)


MIN = 60 * 10**9


@pytest.mark.parametrize("first,then", [
    # a policy moves to another algorithm: the units used carry over
    (group("gcra", 100, MIN, 0, 1, flags=1), group("token_bucket", 1000, MIN, 0, 0, flags=1)),
    (group("token_bucket", 100, MIN, 0, 1, flags=1), group("fixed_window", 1000, MIN, 0, 0, flags=1)),
    (group("fixed_window", 100, MIN, 0, 1, flags=1), group("sliding_window", 50, MIN, 0, 0, flags=1)),
    (group("sliding_log", 100, MIN, 0, 1, flags=1), group("gcra", 1000, MIN, 0, 0, flags=1)),
    # a downgrade: the new limit is already spent; retry and reset say when the old
    # state lets go
    (group("gcra", 1000, MIN, 0, 1, flags=1), group("gcra", 10, MIN, 0, 1, flags=1)),
    (group("token_bucket", 1000, MIN, 0, 1, flags=1), group("token_bucket", 10, MIN, 0, 1, flags=1)),
    (group("fixed_window", 1000, MIN, 0, 1, flags=1), group("fixed_window", 10, MIN, 0, 1, flags=1)),
    (group("sliding_window", 1000, MIN, 0, 1, flags=1), group("sliding_window", 10, MIN, 0, 1, flags=1)),
    # an ad-hoc limit on a policy's key, and a policy's limit on an ad-hoc key
    (group("gcra", 100, MIN, 0, 1, flags=1), group("gcra", 1000, MIN, 0, 0)),
    (group("token_bucket", 100, MIN, 0, 1), group("gcra", 1000, MIN, 0, 0, flags=1)),
    (group("gcra", 100, MIN, 0, 1), group("gcra", 1000, MIN, 0, 0, flags=1)),
    # an ad-hoc limit of another rate reads the same state (redis-cell's rule)
    (group("token_bucket", 100, MIN, 0, 1), group("token_bucket", 1000, MIN, 0, 0)),
    (group("sliding_log", 100, MIN, 0, 1), group("sliding_log", 50, MIN, 0, 0)),
    (group("cell", 99, 100, 60, 1), group("gcra", 1000, MIN, 0, 0)),
])
def test_a_key_read_under_another_limit(conn, sha, first, then):
    key = "other:%s" % uuid.uuid4().hex[:8]
    for _ in range(30):
        mod, lua = both(conn, sha, "TAKE", "0", [key], [first])
        same(mod, lua, "first")
    for cost in (0, 1, 5, 0):
        mod, lua = both(conn, sha, "PEEK", "0", [key], [then[:4] + [cost] + then[5:]])
        same(mod, lua, ("peek", cost))
        mod, lua = both(conn, sha, "TAKE", "0", [key], [then[:4] + [cost] + then[5:]])
        same(mod, lua, ("take", cost))


def test_leases_under_another_max_in_flight(conn, sha):
    key = "conc:%s" % uuid.uuid4().hex[:8]
    g = lambda n, w: group("concurrency", n, MIN, 0, w)
    for i in range(3):
        same(*both(conn, sha, "ACQUIRE", "%016x" % (i + 1), [key], [g(4, 1)]), where=i)
    # more leases held than the new limit has slots: refused as the module refuses it
    same(*both(conn, sha, "ACQUIRE", "%016x" % 9, [key], [g(2, 1)]), where="smaller")
    # a larger limit keeps the leases held
    mod, lua = both(conn, sha, "ACQUIRE", "%016x" % 10, [key], [g(8, 2)])
    same(mod, lua, "larger")
    assert lua[3] == 3, lua
    # a release under another max_in_flight finds no lease of that shape
    mod, lua = both(conn, sha, "RELEASE", "%016x" % 1, [key], [g(5, 0)])
    assert mod == lua, (mod, lua)


def test_a_damaged_state_is_read_as_never_seen(server, conn, sha):
    """A value with the script's prefix but fields no take writes (bytes from
    elsewhere) is a "never seen" state: an answer, never a crash."""
    r = server.client()
    base = "damaged:%s:" % uuid.uuid4().hex[:8]
    for algo, value in [("gcra", "x y z"), ("gcra", "1 2 0"), ("gcra", "nan inf 0x10"), ("gcra", "-5 -1 3"),
                        ("token_bucket", "1 2"), ("token_bucket", "1 2 -7"), ("token_bucket", "1 0 nan"),
                        ("fixed_window", "a 0 9"), ("sliding_window", "1 0 999 999"),
                        ("sliding_log", "5 1,2 x"), ("sliding_log", "")]:
        k = base + algo
        r.set(k, "sluice.lua/1 %s - - %s" % (algo, value))
        got = call(conn, "EVALSHA", sha, 1, k, "TAKE", "0", *map(str, group(algo, 5, MIN, 0, 1)))
        assert isinstance(got, list) and got[:4] == [-1, 1, 5, 4], (algo, value, got)
    r.set(base + "c", "sluice.lua/1 concurrency - - 2 zz,1,1")
    got = call(conn, "EVALSHA", sha, 1, base + "c", "ACQUIRE", "00000000000000ab",
               *map(str, group("concurrency", 2, MIN, 0, 1)))
    assert got[:4] == [-1, 1, 2, 1], got
    r.close()


def test_reset_reads_only_its_keys(server, conn, sha):
    """Keys named like SL.DECIDE's other words ("RESET", "0", "1") holding other
    values do not make a RESET of other keys WRONGTYPE."""
    r = server.client()
    for name in ("RESET", "0", "1"):
        r.set(name, "not a state")
    key = "rst:%s" % uuid.uuid4().hex[:8]
    both(conn, sha, "TAKE", "0", [key], [group("gcra", 5, MIN, 0, 1)])
    mod, lua = both(conn, sha, "RESET", "0", [key], [])
    assert mod == lua == 1, (mod, lua)
    assert r.get("0") == b"not a state"
    r.delete("RESET", "0", "1")
    r.close()


def test_a_replica_holds_the_scripts_states(make_server):
    """Redis replicates a script's effects (SET ... PXAT, DEL), not the script: a
    replica, whatever its clock, holds the primary's values and expiries."""
    primary = make_server("primary", module=False)
    replica = make_server("replica", start=False, module=False)
    replica.args = ["--replicaof", "127.0.0.1", str(primary.port)]
    replica.start()
    p, rr = primary.client(), replica.client()
    deadline = time.monotonic() + 20
    while rr.info("replication").get("master_link_status") != "up":
        assert time.monotonic() < deadline, "the replica link"
        time.sleep(0.05)
    sha = p.script_load(script_text())
    keys = []
    for algo in ("gcra", "token_bucket", "leaky_bucket", "fixed_window", "sliding_log",
                 "sliding_window"):
        keys.append("rep:" + algo)
        for _ in range(3):
            p.evalsha(sha, 1, keys[-1], "TAKE", "0", *map(str, group(algo, 5, 3600 * 10**9, 0, 1)))
    p.evalsha(sha, 1, "rep:lease", "ACQUIRE", "00000000000000ab",
              *map(str, group("concurrency", 3, MIN, 0, 1)))
    keys.append("rep:lease")
    p.evalsha(sha, 1, "rep:gone", "TAKE", "0", *map(str, group("gcra", 5, MIN, 0, 1)))
    p.evalsha(sha, 1, "rep:gone", "RESET", "0")
    assert p.execute_command("WAIT", 1, 10000) == 1
    for k in keys:
        assert p.get(k) is not None and p.get(k) == rr.get(k), k
        assert p.execute_command("PEXPIRETIME", k) == rr.execute_command("PEXPIRETIME", k), k
    assert rr.exists("rep:gone") == 0
    p.close()
    rr.close()


def _random_group(rnd):
    algo = rnd.choice(["gcra", "token_bucket", "leaky_bucket", "fixed_window", "sliding_window",
                       "sliding_log", "cell"])
    if algo == "cell":
        return group("cell", rnd.choice([0, 1, 4, 9]), rnd.choice([1, 5, 7, 100]),
                     rnd.choice([60, 3600]), rnd.choice([0, 1, 2, 5]))
    windows = algo in ("fixed_window", "sliding_window")
    return group(algo, rnd.choice([1, 3, 7, 10, 100, 1024]),
                 rnd.choice([3600, 86400, 7 * 86400]) * 10**9, rnd.choice([0, 0, 1, 2, 5, 50]),
                 rnd.choice([0, 1, 1, 2, 3, 20]),
                 rnd.choice([0, 0, 0, 1]) if windows else 0,
                 rnd.choice([0, 0, -5 * 3600, 9 * 3600 + 1800]) * 10**9 if windows else 0,
                 rnd.choice([0, 0, 1]))


@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5, 6])
def test_random_ops_on_a_few_keys(conn, sha, seed):
    """Every op, random algorithms, limits, flags and calendars, over six keys that
    each op may find holding anything another op left there (states of other
    algorithms, carried or not, leases): the module and the script agree on every
    answer, errors included. (One key repeated in a TAKE keeps one carry flag: the
    module tells states apart by size, and a carried log of 1 and an ad-hoc log of 3
    have the same.)"""
    rnd = random.Random(seed)
    pool = ["ops:%s:%d" % (uuid.uuid4().hex[:8], i) for i in range(6)]
    for step in range(4000):
        op = rnd.choice(["TAKE"] * 6 + ["PEEK"] * 2 + ["RESET", "ACQUIRE", "ACQUIRE", "RELEASE"])
        lease = "0"
        if op in ("ACQUIRE", "RELEASE"):
            n, top = 1, rnd.choice([1, 2, 3])
            lease = "%016x" % rnd.choice([1, 2, 3, 4, 5, 0xabc])
            groups = [group("concurrency", top, rnd.choice([60, 3600]) * 10**9, 0,
                            0 if op == "RELEASE" else rnd.randint(0, top + 1))]
            keys = [rnd.choice(pool)]
        else:
            n = rnd.randint(1, 3)
            keys = [rnd.choice(pool) for _ in range(n)]
            groups = [] if op == "RESET" else [_random_group(rnd) for _ in range(n)]
            flags = {}
            for k, g in zip(keys, groups):
                g[7] = flags.setdefault(k, g[7])
        mod, lua = both(conn, sha, op, lease, keys, groups)
        same(mod, lua, (step, op, lease, keys, groups))


# ---- REFUND: a take given back ----

REFUND_LIMITS = [
    ("gcra", 10, 3600 * 10**9, 0), ("gcra", 7, 3600 * 10**9, 3),
    ("leaky_bucket", 5, 3600 * 10**9, 0), ("token_bucket", 10, 3600 * 10**9, 0),
    ("token_bucket", 7, 3600 * 10**9, 3),
    ("fixed_window", 10, 3600 * 10**9, 0), ("sliding_window", 10, 3600 * 10**9, 0),
    ("sliding_log", 10, 3600 * 10**9, 0), ("cell", 9, 10, 3600),
]


def _g(spec, cost, carried=0):
    algo, a, b, c = spec
    return group(algo, a, b, c, cost, flags=carried)


@pytest.mark.parametrize("spec", REFUND_LIMITS, ids=["%s-%s" % (s[0], s[1]) for s in REFUND_LIMITS])
@pytest.mark.parametrize("carried", [0, 1], ids=["adhoc", "carried"])
def test_refund_side_by_side(conn, sha, spec, carried):
    """A take, then another given back: the same units given back in the module and the
    script, and then both decide as a key that never took the second (a twin)."""
    if spec[0] == "cell" and carried:
        pytest.skip("redis-cell's limits are never carried")
    base = "refund:%s:%s" % (spec[0], uuid.uuid4().hex[:8])
    key, twin = base + ":k", base + ":twin"
    same(*both(conn, sha, "TAKE", "0", [key], [_g(spec, 1, carried)]), where="first take")
    same(*both(conn, sha, "TAKE", "0", [twin], [_g(spec, 1, carried)]), where="twin take")
    mod, lua = both(conn, sha, "TAKE", "0", [key], [_g(spec, 2, carried)])
    same(mod, lua, "second take")
    assert mod[:2] == [-1, 1], mod
    mod, lua = both(conn, sha, "REFUND", "0", [key], [_g(spec, 2, carried)])
    assert mod == lua == 2, (mod, lua)
    for cost in (0, 1, 5):
        mod, lua = both(conn, sha, "PEEK", "0", [key], [_g(spec, cost, carried)])
        same(mod, lua, ("peek", cost))
        tm, tl = both(conn, sha, "PEEK", "0", [twin], [_g(spec, cost, carried)])
        assert mod[:4] == tm[:4] and lua[:4] == tl[:4], (cost, mod, tm, lua, tl)
    # more than was taken: never beyond a key that took nothing
    mod, lua = both(conn, sha, "REFUND", "0", [key], [_g(spec, 100, carried)])
    assert mod == lua == 1, (mod, lua)
    mod, lua = both(conn, sha, "PEEK", "0", [key], [_g(spec, 0, carried)])
    same(mod, lua, "after all given back")
    limit = spec[1] + 1 if spec[0] == "cell" else spec[3] or spec[1]
    assert lua[1:4] == [1, limit, limit], lua


def test_refund_deletes_a_key_given_all_back_and_moves_its_expiry(server, conn, sha):
    r = server.client()
    key = "refund:exp:%s" % uuid.uuid4().hex[:8]
    g = lambda cost: group("gcra", 10, 3600 * 10**9, 0, cost)  # 6 minutes an interval
    both(conn, sha, "TAKE", "0", [key], [g(5)])
    assert r.pttl(key + ":m") > 29 * 60 * 1000 and r.pttl(key + ":l") > 29 * 60 * 1000
    mod, lua = both(conn, sha, "REFUND", "0", [key], [g(3)])
    assert mod == lua == 3
    m, l = r.pttl(key + ":m"), r.pttl(key + ":l")
    # (the expiry is rounded up to a whole ms: one more than 12 minutes is right too)
    assert 11 * 60 * 1000 < l <= 12 * 60 * 1000 + 1 and abs(m - l) <= 1000, (m, l)
    mod, lua = both(conn, sha, "REFUND", "0", [key], [g(2)])
    assert mod == lua == 2
    assert r.exists(key + ":m", key + ":l") == 0
    r.close()


def test_refund_gives_nothing_to_what_the_limit_did_not_take(server, conn, sha):
    """An absent key, another algorithm's state, a carried limit on an ad-hoc state and
    the other way round, a sliding log of another size: 0, and nothing changes."""
    r = server.client()
    base = "refund:none:%s" % uuid.uuid4().hex[:8]
    hour = 3600 * 10**9
    mod, lua = both(conn, sha, "REFUND", "0", [base + ":absent"], [group("gcra", 5, hour, 0, 1)])
    assert mod == lua == 0
    assert r.exists(base + ":absent:m", base + ":absent:l") == 0
    cases = [
        (group("gcra", 5, hour, 0, 2), group("token_bucket", 5, hour, 0, 2)),
        (group("gcra", 5, hour, 0, 2), group("gcra", 5, hour, 0, 2, flags=1)),
        (group("gcra", 5, hour, 0, 2, flags=1), group("gcra", 5, hour, 0, 2)),
        (group("gcra", 5, hour, 0, 2, flags=1), group("gcra", 50, hour, 0, 2, flags=1)),
        (group("sliding_log", 5, hour, 0, 2), group("sliding_log", 6, hour, 0, 2)),
    ]
    for i, (took, back) in enumerate(cases):
        k = "%s:%d" % (base, i)
        both(conn, sha, "TAKE", "0", [k], [took])
        before = r.get(k + ":m"), r.get(k + ":l")
        mod, lua = both(conn, sha, "REFUND", "0", [k], [back])
        assert mod == lua == 0, (took, back, mod, lua)
        assert (r.get(k + ":m"), r.get(k + ":l")) == before
    r.close()


M_REFUND_BAD = [
    ("REFUND", "0", ["k", "k2"], [group("gcra", 5, M, 0, 1)] * 2),
    ("REFUND", "0", ["k"], []),
    ("REFUND", "0", ["k"], [group("concurrency", 5, M, 0, 1)]),
    ("REFUND", "00000000000000ab", ["k"], [group("gcra", 5, M, 0, 1)]),
    ("REFUND", "0", ["k"], [group("gcra", 5, M, 0, -1)]),
    ("REFUND", "0", ["k"], [group("gcra", 0, M, 0, 1)]),
    ("REFUND", "0", [""], [group("gcra", 5, M, 0, 1)]),
    ("GIVEBACK", "0", ["k"], [group("gcra", 5, M, 0, 1)]),
]


@pytest.mark.parametrize("op,lease,keys,groups", M_REFUND_BAD, ids=range(len(M_REFUND_BAD)))
def test_refund_bad_arguments(server, conn, sha, op, lease, keys, groups):
    base = "refund:bad:%s:" % uuid.uuid4().hex[:8]
    keys = [base + k if k else "" for k in keys]
    mod, lua = both(conn, sha, op, lease, keys, groups, suffix=("", "") if "" in keys else (":m", ":l"))
    assert isinstance(mod, Error), mod
    same(mod, lua, (op, lease, groups))


def test_refund_of_a_foreign_value_is_wrongtype(server, conn, sha):
    r = server.client()
    k = "refund:wt:%s" % uuid.uuid4().hex[:8]
    r.set(k + ":m", "hello")
    r.set(k + ":l", "hello")
    mod, lua = both(conn, sha, "REFUND", "0", [k], [group("gcra", 5, M, 0, 1)])
    same(mod, lua, "foreign")
    assert lua.message.startswith("WRONGTYPE"), lua
    assert r.get(k + ":l") == b"hello"
    r.close()


@pytest.mark.parametrize("algo", ["gcra", "token_bucket", "fixed_window", "sliding_window",
                                  "sliding_log", "leaky_bucket"])
@pytest.mark.parametrize("carried", [0, 1], ids=["adhoc", "carried"])
def test_refund_random_trace(conn, sha, algo, carried):
    """Takes, peeks and refunds at random on a module key and a script key: the same
    answer each time."""
    rnd = random.Random("refund-%s-%d" % (algo, carried))
    key = "refund:trace:%s:%s" % (algo, uuid.uuid4().hex[:8])
    given = 0
    for step in range(80):
        cost = rnd.choice([0, 1, 1, 2, 3, 7, 40])
        op = rnd.choice(["TAKE", "TAKE", "REFUND", "REFUND", "PEEK"])
        g = group(algo, 9, 3600 * 10**9, 0, cost, flags=carried)
        mod, lua = both(conn, sha, op, "0", [key], [g])
        same(mod, lua, "%s step %d %s %s" % (algo, step, op, g))
        if op == "REFUND":
            assert isinstance(lua, int) and 0 <= lua <= cost, lua
            given += lua
    assert given > 10, given


# ---- CHARGE: a take never refused ----

CHARGE_LIMITS = [s for s in REFUND_LIMITS if s[0] != "sliding_log"] + [
    ("gcra", 10, 10**9, 0), ("token_bucket", 5, 10**9, 0), ("gcra", 1000, 86400 * 10**9, 0),
]


@pytest.mark.parametrize("spec", CHARGE_LIMITS, ids=["%s-%s-%s" % s[:3] for s in CHARGE_LIMITS])
@pytest.mark.parametrize("carried", [0, 1], ids=["adhoc", "carried"])
def test_charge_side_by_side(conn, sha, spec, carried):
    """A charge of three bursts on a key never seen, then takes the debt refuses, a
    refund of part of it, and a charge of 0: the module and the script answer alike
    throughout."""
    if spec[0] == "cell" and carried:
        pytest.skip("redis-cell's limits are never carried")
    key = "charge:%s:%s" % (spec[0], uuid.uuid4().hex[:8])
    burst = spec[1] + 1 if spec[0] == "cell" else spec[3] or spec[1]
    mod, lua = both(conn, sha, "CHARGE", "0", [key], [_g(spec, 3 * burst, carried)])
    same(mod, lua, "charge")
    assert mod[:4] == [-1, 1, burst, 0], mod  # admitted, nothing remains
    for cost in (1, 2):
        mod, lua = both(conn, sha, "TAKE", "0", [key], [_g(spec, cost, carried)])
        same(mod, lua, ("take in debt", cost))
        assert mod[0] == 0 and mod[1] == 0 and mod[3] == 0, mod
    mod, lua = both(conn, sha, "REFUND", "0", [key], [_g(spec, burst, carried)])
    assert mod == lua == burst, (mod, lua)
    mod, lua = both(conn, sha, "CHARGE", "0", [key], [_g(spec, 0, carried)])
    same(mod, lua, "charge of 0")
    for cost in (0, 1, burst):
        same(*both(conn, sha, "PEEK", "0", [key], [_g(spec, cost, carried)]), where=("peek", cost))


@pytest.mark.parametrize("algo", ["gcra", "token_bucket", "fixed_window", "sliding_window",
                                  "leaky_bucket"])
@pytest.mark.parametrize("carried", [0, 1], ids=["adhoc", "carried"])
def test_charge_random_trace(conn, sha, algo, carried):
    """Takes, peeks, refunds and charges at random on a module key and a script key,
    under two limits of the algorithm (the second reads the first's debt): the same
    answer each time."""
    rnd = random.Random("charge-%s-%d" % (algo, carried))
    key = "charge:trace:%s:%s" % (algo, uuid.uuid4().hex[:8])
    for step in range(120):
        cost = rnd.choice([0, 1, 1, 2, 3, 7, 40])
        op = rnd.choice(["TAKE", "TAKE", "REFUND", "CHARGE", "CHARGE", "PEEK"])
        g = group(algo, rnd.choice([9, 9, 9, 4]), 3600 * 10**9, 0, cost, flags=carried)
        mod, lua = both(conn, sha, op, "0", [key], [g])
        same(mod, lua, "%s step %d %s %s" % (algo, step, op, g))
        if op == "CHARGE":
            assert mod[:2] == [-1, 1], mod


def test_charge_on_a_key_of_another_shape_carries_it_over(conn, sha):
    """A policy's limit charged on a key another limit wrote: the units carry over, then
    the charge adds to them, in the module and the script alike."""
    key = "charge:carry:%s" % uuid.uuid4().hex[:8]
    for _ in range(4):
        same(*both(conn, sha, "TAKE", "0", [key], [group("token_bucket", 100, M, 0, 1, flags=1)]))
    mod, lua = both(conn, sha, "CHARGE", "0", [key], [group("gcra", 10, M, 0, 12, flags=1)])
    same(mod, lua, "charge")
    # 16 intervals of 6 s: a take of one waits 96 + 6 - 60 s
    mod, lua = both(conn, sha, "TAKE", "0", [key], [group("gcra", 10, M, 0, 1, flags=1)])
    same(mod, lua, "take")
    assert mod[1] == 0 and abs(mod[4] - 42 * 10**9) <= SLACK_NS, mod


M_CHARGE_BAD = [
    ("CHARGE", "0", ["k", "k2"], [group("gcra", 5, M, 0, 1)] * 2),
    ("CHARGE", "0", ["k"], [group("concurrency", 5, M, 0, 1)]),
    ("CHARGE", "0", ["k"], [group("sliding_log", 5, M, 0, 1)]),
    ("CHARGE", "0", ["k"], [group("gcra", 5, M, 0, -1)]),
    ("CHARGE", "00000000000000ab", ["k"], [group("gcra", 5, M, 0, 1)]),
]


@pytest.mark.parametrize("op,lease,keys,groups", M_CHARGE_BAD, ids=range(len(M_CHARGE_BAD)))
def test_charge_bad_arguments(server, conn, sha, op, lease, keys, groups):
    base = "charge:bad:%s:" % uuid.uuid4().hex[:8]
    keys = [base + k for k in keys]
    mod, lua = both(conn, sha, op, lease, keys, groups)
    assert isinstance(mod, Error), mod
    same(mod, lua, (op, lease, groups))
    if groups[0][0] == "sliding_log":
        assert mod.message == "ERR CHARGE: a sliding_log cannot owe (it holds at most limit " \
                              "timestamps)", mod.message
