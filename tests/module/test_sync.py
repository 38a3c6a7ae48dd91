"""SL.SYNC, the sync strategy's central command (src/redis_module/sync.c), on a real
redis-server with the module: the same grants, remaining and record as the C rules
(build/tests/quota_replay) on every shared case of tests/testdata/sync_cases.py, every
argument's error, the central's clock, WRONGTYPE both ways, the expiry rule, effects
replicated as SET ... PXAT, and routing by its key in Redis Cluster.

The shared cases give their times (AT) from 2025-12-01 UTC on. A record expires (PXAT,
on the wall clock) a lease after its last sync at the earliest, so on a server whose
clock is past those times Redis would drop a case's record between two of its syncs. The
cases are therefore run shifted by a whole number of seconds (SHIFT) to an hour from now.
The rules depend on differences of times only: the grants of a case and of its shifted
copy are the same (checked on quota_replay for every case), and its records differ by
SHIFT in their time fields.
"""

import glob
import os
import struct
import subprocess
import time
import uuid

import pytest
import redis

from conftest import ROOT
from respclient import Error
from sync_cases import BAD_CONFIGS, BAD_SYNCS, CASES, SCALE, SEC, T0, replay_script
from test_cluster import _owners, cluster  # noqa: F401 (a fixture)

QUOTA_REPLAY = os.path.join(ROOT, "build", "tests", "quota_replay")
WRONGTYPE = "WRONGTYPE Operation against a key holding the wrong kind of value"
HEADER = b"\xf1\x01\xfe\x00"  # magic, version 1, SLM_SYNC_TAG, reserved
FIELDS = 85                   # sl_quota_central's int64 fields
UNITS_MAX = 2 ** 44           # SL_QUOTA_UNITS_MAX
SPAN_MAX = 2 ** 61 - 1        # SL_SPAN_MAX
TIME_MAX = 2 ** 62 - 1        # SL_TIME_MAX
LEASES = 3                    # SL_QUOTA_LEASES
SHIFT = max(0, (time.time_ns() + 3600 * SEC - T0) // SEC * SEC)

GOOD_CONFIG = ("gcra", 100, SEC, 100, SEC // 10, 3)


def replay(script):
    """quota_replay's output lines for a script, each split into words."""
    if not os.path.exists(QUOTA_REPLAY):
        pytest.fail("quota_replay is not built: %s (run make)" % QUOTA_REPLAY)
    out = subprocess.run([QUOTA_REPLAY], input=script.encode(), capture_output=True,
                         timeout=60, check=True)
    return [line.split() for line in out.stdout.decode().splitlines()]


def with_states(script):
    """The script with a "state" line after every sync: the record after each."""
    lines = []
    for line in script.splitlines():
        lines.append(line)
        if line.startswith("sync "):
            lines.append("state")
    return "\n".join(lines) + "\n"


def shifted(syncs, by=SHIFT):
    """The syncs `by` ns later."""
    return [(s[0] + by,) + tuple(s[1:]) for s in syncs]


def sync_args(key, config, sync, at=True):
    """SL.SYNC's arguments for one sync of a case (with AT at its time, or without)."""
    algorithm, limit, period, burst, interval, nodes = config
    t, node, admitted, asked, length, carry = sync
    args = ["SL.SYNC", key, algorithm, limit, period, burst, interval, nodes, node, admitted,
            asked, length, carry]
    return args + (["AT", t] if at else [])


def record(v):
    """The 85 fields of a sync record's value, after checking its header."""
    assert v is not None and len(v) == len(HEADER) + 8 * FIELDS, v
    assert v[:4] == HEADER, v[:4]
    return list(struct.unpack("<%dq" % FIELDS, v[4:]))


def expiry_ms(config, st):
    """The rule, from the record: the latest of every lease's end (synced_at + lease for
    slots with a demand) and the first instant the refill, its remainder frac counted,
    brings the budget back to the burst; in Unix ms rounded up, saturated at
    SL_TIME_MAX."""
    _, limit, period, burst, interval, _ = config
    rate, brim = limit * SCALE, (burst or limit) * SCALE
    lease = min(LEASES * interval, TIME_MAX)
    _, _, remaining, anchor, frac = st[:5]
    at = 0
    for j in range(16):
        synced_at, demand = st[5 + 5 * j], st[6 + 5 * j]
        if demand > 0:
            at = max(at, min(synced_at + lease, TIME_MAX))
    if remaining < brim:
        num = (brim - remaining) * period - frac
        at = max(at, min(anchor + -(-num // rate), TIME_MAX))
    return -(-at // 10 ** 6)


@pytest.fixture
def conn(server):
    c = server.conn()
    yield c
    c.close()


def error_of(c, *args):
    with pytest.raises(Error) as e:
        c.call(*args)
    return e.value.message


# ---- 1. the shared cases: the C rules' answers, record and expiry after every sync ----

@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_case_matches_quota_replay(server, conn, key, case):
    _, config, syncs = case
    moved = shifted(syncs)
    want = replay(with_states(replay_script(config, moved)))
    # the shift changes no grant: the rules see differences of times only
    plain = [w for w in replay(replay_script(config, syncs)) if w[0] == "grant"]
    assert plain == [w for w in want if w[0] == "grant"]
    assert want[0] == ["ok"], want[0]
    r = server.client()
    for i, s in enumerate(moved):
        grant, state = want[1 + 2 * i], want[2 + 2 * i]
        assert grant[0] == "grant" and state[0] == "state", (grant, state)
        reply = conn.call(*sync_args(key, config, s))
        assert reply == [int(x) for x in grant[1:]], (i, s, reply, grant)
        st = record(r.get(key))
        assert st == [int(x) for x in state[1:]], (i, s)
        assert r.execute_command("PEXPIRETIME", key) == expiry_ms(config, st), (i, s)
    r.close()


# ---- 2. the shared refusals: the argument named, the record kept ----

def _first_bad(config, sync):
    """The argument SL.SYNC must name for a config and a sync (the protocol's ranges, in
    order), as (name, lo, hi), or None when every one is in range."""
    algorithm, limit, period, burst, interval, nodes = config
    _, node, admitted, asked, length, carry = sync
    ranges = [("limit", limit, 1, UNITS_MAX), ("period_ns", period, 1, SPAN_MAX),
              ("burst", burst, 0, UNITS_MAX), ("interval_ns", interval, 1, SPAN_MAX),
              ("nodes", nodes, 1, 16), ("node", node, 0, nodes - 1),
              ("admitted", admitted, 0, UNITS_MAX), ("asked", asked, admitted, UNITS_MAX),
              ("length_ns", length, 0, SPAN_MAX), ("carry", carry, 0, SCALE)]
    for name, v, lo, hi in ranges:
        if not lo <= v <= hi:
            return name, lo, hi
    return None


def _keeps_its_bytes(server, conn, key, config, bad_args, line):
    r = server.client()
    assert len(conn.call(*sync_args(key, config, (T0 + SHIFT, 0, 0, 1, 0, 0)))) == 3
    before, at = r.get(key), r.execute_command("PEXPIRETIME", key)
    assert error_of(conn, *bad_args) == line
    assert r.get(key) == before and r.execute_command("PEXPIRETIME", key) == at
    r.close()


@pytest.mark.parametrize("bad", BAD_SYNCS, ids=[str(b[1][1:]) for b in BAD_SYNCS])
def test_bad_sync_names_the_argument(server, conn, key, bad):
    config, sync, name = bad
    sync = shifted([sync])[0]
    out = replay(replay_script(config, [sync]))
    assert out[:2] == [["ok"], ["error", name]], out  # the C refuses it too
    arg, lo, hi = _first_bad(config, sync)
    _keeps_its_bytes(server, conn, key, config, sync_args(key, config, sync),
                     "ERR %s must be an integer from %d to %d" % (arg, lo, hi))


@pytest.mark.parametrize("bad", BAD_CONFIGS, ids=["%s-%d" % (b[1], i) for i, b in
                                                  enumerate(BAD_CONFIGS)])
def test_bad_config_names_the_argument(server, conn, key, bad):
    config, name = bad
    sync = (T0 + SHIFT, 0, 0, 1, 0, 0)
    assert replay(replay_script(config, [sync]))[0] == ["error", name]
    if config[0] == "fixed_window":
        line = "ERR sync leases rates only: gcra, token_bucket or leaky_bucket"
    else:
        line = "ERR %s must be an integer from %d to %d" % _first_bad(config, sync)
    _keeps_its_bytes(server, conn, key, GOOD_CONFIG, sync_args(key, config, sync), line)


# ---- 3. every argument: out of range, not an integer ----

GOOD = [100, SEC, 100, SEC // 10, 3, 1, 2, 5, SEC // 10, 0]  # limit .. carry
NAMES = ["limit", "period_ns", "burst", "interval_ns", "nodes", "node", "admitted", "asked",
         "length_ns", "carry"]
RANGES = {"limit": (1, UNITS_MAX), "period_ns": (1, SPAN_MAX), "burst": (0, UNITS_MAX),
          "interval_ns": (1, SPAN_MAX), "nodes": (1, 16), "node": (0, GOOD[4] - 1),
          "admitted": (0, UNITS_MAX), "asked": (GOOD[6], UNITS_MAX),
          "length_ns": (0, SPAN_MAX), "carry": (0, SCALE)}
NOT_INTEGERS = ["x", "1.5", "", " 7", "7 ", "1e3", "0x10", "+1", "--1", "99999999999999999999"]


def _argument_table():
    rows = []
    for i, name in enumerate(NAMES):
        lo, hi = RANGES[name]
        for v in [lo - 1, hi + 1] + NOT_INTEGERS:
            rows.append((name, i, v))
    for v in [-1, TIME_MAX + 1, "x", "", "1.0"]:
        rows.append(("AT", None, v))
    return rows


@pytest.mark.parametrize("name,i,v", _argument_table(),
                         ids=["%s=%r" % (n, v) for n, _, v in _argument_table()])
def test_argument_out_of_range_or_not_an_integer(server, conn, key, name, i, v):
    args = list(GOOD)
    tail = []
    if i is None:
        tail = ["AT", v]
    else:
        args[i] = v
    lo, hi = RANGES.get(name, (0, TIME_MAX))
    line = "ERR %s must be an integer from %d to %d" % (name, lo, hi)
    assert error_of(conn, "SL.SYNC", key, "gcra", *args, *tail) == line
    assert server.client().exists(key) == 0


def test_ranges_follow_the_arguments_before(conn, key):
    # node's top is nodes - 1, asked's bottom the admitted given
    assert error_of(conn, "SL.SYNC", key, "gcra", 100, SEC, 100, SEC, 16, 16, 0, 0, 0, 0) == \
        "ERR node must be an integer from 0 to 15"
    assert error_of(conn, "SL.SYNC", key, "gcra", 100, SEC, 100, SEC, 1, 1, 0, 0, 0, 0) == \
        "ERR node must be an integer from 0 to 0"
    assert error_of(conn, "SL.SYNC", key, "gcra", 100, SEC, 100, SEC, 3, 0, 7, 6, 0, 0) == \
        "ERR asked must be an integer from 7 to 17592186044416"
    # the edges of every range are accepted
    for i, args in enumerate([[UNITS_MAX, SPAN_MAX, UNITS_MAX, SPAN_MAX, 16, 15, UNITS_MAX,
                               UNITS_MAX, SPAN_MAX, SCALE, "AT", TIME_MAX],
                              [1, 1, 0, 1, 1, 0, 0, 0, 0, 0, "at", 0]]):
        assert len(conn.call("SL.SYNC", "%s:edge%d" % (key, i), "gcra", *args)) == 3


def test_the_first_bad_argument_is_named(conn, key):
    bad = ["x"] * 10
    assert error_of(conn, "SL.SYNC", key, "gcra", *bad) == \
        "ERR limit must be an integer from 1 to 17592186044416"
    assert error_of(conn, "SL.SYNC", key, "nope", *bad) == "ERR unknown algorithm"
    args = list(GOOD)
    args[8] = -1  # length_ns, then carry too
    args[9] = SCALE + 1
    assert error_of(conn, "SL.SYNC", key, "gcra", *args, "AT", "x") == \
        "ERR length_ns must be an integer from 0 to 2305843009213693951"
    # an argument before the tail is named before the tail's syntax error
    args = list(GOOD)
    args[0] = 0
    assert error_of(conn, "SL.SYNC", key, "gcra", *args, "EX", 1) == \
        "ERR limit must be an integer from 1 to 17592186044416"


@pytest.mark.parametrize("algorithm,line", [
    ("fixed_window", "ERR sync leases rates only: gcra, token_bucket or leaky_bucket"),
    ("sliding_log", "ERR sync leases rates only: gcra, token_bucket or leaky_bucket"),
    ("SLIDING_WINDOW", "ERR sync leases rates only: gcra, token_bucket or leaky_bucket"),
    ("concurrency", "ERR sync leases rates only: gcra, token_bucket or leaky_bucket"),
    ("cell", "ERR unknown algorithm"),
    ("nope", "ERR unknown algorithm"),
    ("", "ERR unknown algorithm"),
])
def test_algorithm_errors(server, conn, key, algorithm, line):
    assert error_of(conn, "SL.SYNC", key, algorithm, *GOOD) == line
    assert server.client().exists(key) == 0


def test_algorithms_in_any_case(conn, key):
    for a in ("GCRA", "Token_Bucket", "leaky_bucket"):
        assert len(conn.call("SL.SYNC", key + a, a, *GOOD)) == 3


@pytest.mark.parametrize("tail", [["AT"], ["AT", 5, "AT", 5], ["EX", 5], ["AT", 5, 1], [5, 5],
                                  ["ATT", 5]])
def test_tail_syntax_error(server, conn, key, tail):
    assert error_of(conn, "SL.SYNC", key, "gcra", *GOOD, *tail) == "ERR syntax error"
    assert server.client().exists(key) == 0


def test_arity(conn, key):
    assert error_of(conn, "SL.SYNC", key, "gcra", *GOOD[:-1]) == \
        "ERR wrong number of arguments for 'sl.sync' command"
    assert error_of(conn, "SL.SYNC") == "ERR wrong number of arguments for 'sl.sync' command"


# ---- 4. the central's clock ----

def test_without_at_the_servers_clock_refills(server, key):
    """A drained budget, then a sync a moment later: remaining is what the rate refilled
    over the server's time between the two, which lies between the test's own bounds."""
    r = server.client()
    args = ["SL.SYNC", key, "token_bucket", 100, SEC, 100, SEC // 10, 1, 0]
    before_first = time.time_ns()
    first = r.execute_command(*args, 100, 100, SEC // 10, 0)
    after_first = time.time_ns()
    assert first[2] == 0, first  # the whole burst admitted: nothing left
    anchor = record(r.get(key))[3]
    assert abs(anchor - after_first) < 60 * SEC, "the record's time is not Unix ns"
    time.sleep(0.2)
    before_second = time.time_ns()
    second = r.execute_command(*args, 0, 0, SEC // 10, 0)
    after_second = time.time_ns()
    # the server read its clock (the host's, as the test's) once within each command
    lo = (before_second - after_first) * 100 * SCALE // SEC
    hi = (after_second - before_first) * 100 * SCALE // SEC
    assert lo - SCALE <= second[2] <= hi + SCALE, (second, lo, hi)
    assert second[2] > 0
    r.close()


# ---- 5. WRONGTYPE, both ways ----

def _sync_record(r, key):
    r.execute_command(*sync_args(key, GOOD_CONFIG, (T0 + SHIFT, 0, 0, 1, 0, 0)))
    return r.get(key)


@pytest.mark.parametrize("setup", [
    lambda r, k: r.set(k, "hello"),
    lambda r, k: r.set(k, 12345),
    lambda r, k: r.set(k, b""),
    lambda r, k: r.rpush(k, "x"),
    lambda r, k: r.hset(k, "f", "v"),
    lambda r, k: r.execute_command("SL.TAKE", k, 10, 60),
    lambda r, k: r.execute_command("SL.TAKE", k, 10, 60, "ALGORITHM", "sliding_log"),
    lambda r, k: r.set(k, _sync_record(r, k + ":x")[:-1]),              # a byte short
    lambda r, k: r.set(k, _sync_record(r, k + ":x") + b"\x00"),         # a byte long
    lambda r, k: r.set(k, b"\xf1\x02" + _sync_record(r, k + ":x")[2:]),  # version 2
    lambda r, k: r.set(k, b"\xf1\x01\xfd\x00" + _sync_record(r, k + ":x")[4:]),  # another tag
    lambda r, k: r.set(k, b"\xf1\x01\xfe\x01" + _sync_record(r, k + ":x")[4:]),  # byte 3
], ids=["text", "integer", "empty", "list", "hash", "take-state", "sliding-log-state",
        "short", "long", "version", "tag", "reserved"])
def test_sync_on_a_foreign_value(server, conn, key, setup):
    r = server.client()
    setup(r, key)
    before, ttl = r.dump(key), r.execute_command("PEXPIRETIME", key)
    for a in (sync_args(key, GOOD_CONFIG, (T0 + SHIFT, 0, 0, 1, 0, 0)),
              sync_args(key, GOOD_CONFIG, (T0 + SHIFT, 1, 0, 1, 0, 0), at=False)):
        assert error_of(conn, *a) == WRONGTYPE
    assert r.dump(key) == before and r.execute_command("PEXPIRETIME", key) == ttl
    r.close()


def _limit_commands(key):
    g = ["gcra", 10, 60 * SEC, 0, 1, 0, 0, 0]
    c = ["concurrency", 2, SEC, 0, 1, 0, 0, 0]
    return [["SL.TAKE", key, 10, 60], ["SL.PEEK", key, 10, 60], ["CL.THROTTLE", key, 1, 1, 1],
            ["SL.TAKE", key, 10, 60, "ALGORITHM", "fixed_window"],
            ["SL.ACQUIRE", key, 1, 1000], ["SL.RELEASE", key, "0000000000000001" + "00000001"],
            ["SL.TAKEMANY", 1, key, "LIMIT", 1, 60],
            ["SL.DECIDE", "TAKE", "0", 1, key] + g, ["SL.DECIDE", "PEEK", "0", 1, key] + g,
            ["SL.DECIDE", "REFUND", "0", 1, key] + g,
            ["SL.DECIDE", "ACQUIRE", "00000000000000ab", 1, key] + c,
            ["SL.DECIDE", "RELEASE", "00000000000000ab", 1, key] + c]


def test_limit_commands_on_a_sync_record(server, conn, key):
    r = server.client()
    v = _sync_record(r, key)
    at = r.execute_command("PEXPIRETIME", key)
    for cmd in _limit_commands(key):
        assert error_of(conn, *cmd) == WRONGTYPE, cmd
    assert r.get(key) == v and r.execute_command("PEXPIRETIME", key) == at
    # a reset forgets a record as it forgets any state of the module's
    assert conn.call("SL.RESET", key) == 1 and r.exists(key) == 0
    _sync_record(r, key)
    assert conn.call("SL.DECIDE", "RESET", "0", 1, key) == 1 and r.exists(key) == 0
    r.close()


# ---- 6. expiry ----

@pytest.mark.parametrize("config,syncs", [
    (GOOD_CONFIG, [(0, 0, 10, SEC // 10, 0)]),           # a full budget: the lease's end
    (GOOD_CONFIG, [(0, 100, 100, SEC // 10, SCALE)]),    # drained: the refill's end
    (("gcra", 7, SEC, 3, SEC // 10, 3),                  # a refill's remainder (frac)
     [(2, 3, 9, SEC // 10, SCALE // 3), (1, 1, 1, SEC // 10, 0)]),
    (("leaky_bucket", 1, 60 * SEC, 1, SEC // 4, 3), [(1, 400, 400, SEC, 0)]),  # deep debt
], ids=["lease", "refill", "frac", "debt"])
def test_expiry_follows_the_rule(server, key, config, syncs):
    """On the server's clock: PEXPIRETIME is the rule applied to the record, and PTTL
    what is left of it between the test's clock readings."""
    r = server.client()
    for s in syncs:
        r.execute_command(*sync_args(key, config, (0,) + s, at=False))
        time.sleep(0.01)
    st = record(r.get(key))
    want = expiry_ms(config, st)
    assert r.execute_command("PEXPIRETIME", key) == want
    before = time.time_ns() // 10 ** 6
    pttl = r.pttl(key)
    after = -(-time.time_ns() // 10 ** 6)
    assert want - after - 1000 <= pttl <= want - before + 1000, (pttl, want)
    # the lease of the node that synced last always counts
    lease_end = st[5 + 5 * syncs[-1][0]] + LEASES * config[4]
    assert want >= -(-lease_end // 10 ** 6)
    r.close()


def test_expiry_saturates(server, key):
    # a debt that 1 a 73-year period would take longer than SL_TIME_MAX to refill
    r = server.client()
    args = ["SL.SYNC", key, "gcra", 1, SPAN_MAX, UNITS_MAX, SEC, 1, 0, UNITS_MAX, UNITS_MAX, 0,
            0, "AT", T0 + SHIFT]
    assert r.execute_command(*args)[2] == 0
    r.execute_command(*args[:-2], "AT", T0 + SHIFT + 1)
    assert r.execute_command("PEXPIRETIME", key) == -(-TIME_MAX // 10 ** 6)
    assert expiry_ms(("gcra", 1, SPAN_MAX, UNITS_MAX, SEC, 1), record(r.get(key))) == \
        -(-TIME_MAX // 10 ** 6)
    r.close()


def test_a_record_already_expired_is_dropped(server, key):
    # a sync at a time long past answers, and its record expires at once
    r = server.client()
    reply = r.execute_command(*sync_args(key, GOOD_CONFIG, (T0 - 86400 * SEC, 0, 0, 10, 0, 0)))
    assert len(reply) == 3 and reply[2] == 100 * SCALE
    assert r.exists(key) == 0
    r.close()


# ---- 7. replication: effects, not the command ----

def _wait(pred, what, timeout=20.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(0.05)
    pytest.fail("timed out waiting for " + what)


def _aof_commands(workdir):
    """The incremental AOF's commands, as lists of bytes, without SELECT, MULTI, EXEC."""
    out = []
    for f in sorted(glob.glob(os.path.join(workdir, "appendonlydir", "*.incr.aof"))):
        with open(f, "rb") as fh:
            data = fh.read()
        i = 0
        while i < len(data):
            j = data.index(b"\r\n", i)
            argc, i = int(data[i + 1:j]), j + 2
            cmd = []
            for _ in range(argc):
                j = data.index(b"\r\n", i)
                n, i = int(data[i + 1:j]), j + 2
                cmd.append(data[i:i + n])
                i += n + 2
            if cmd[0].upper() not in (b"SELECT", b"MULTI", b"EXEC"):
                out.append(cmd)
    return out


def test_replica_and_aof_hold_the_effects(make_server):
    primary = make_server("primary", args=["--appendonly", "yes", "--appendfsync", "always"])
    replica = make_server("replica", start=False)
    replica.args = ["--replicaof", "127.0.0.1", str(primary.port)]
    replica.start()
    p, rr = primary.client(), replica.client()
    _wait(lambda: rr.info("replication").get("master_link_status") == "up", "the replica link")
    _, config, syncs = CASES[0]
    want = []
    keys = ["sync:a", "sync:b\r\n\x00odd"]
    for i, s in enumerate(shifted(syncs[:10])):
        k = keys[i % 2]
        p.execute_command(*sync_args(k, config, s, at=i % 3 != 0))
        want.append([b"SET", k.encode(), p.get(k), b"PXAT",
                     str(p.execute_command("PEXPIRETIME", k)).encode()])
    # a refused sync writes nothing, so sends nothing
    offset = p.info("replication")["master_repl_offset"]
    with pytest.raises(redis.exceptions.ResponseError):
        p.execute_command(*sync_args(keys[0], config, (0, 9, 0, 0, 0, 0)))
    assert p.info("replication")["master_repl_offset"] == offset
    assert p.execute_command("WAIT", 1, 10000) == 1
    for k in keys:
        assert p.dump(k) is not None and p.dump(k) == rr.dump(k), k
        assert p.execute_command("PEXPIRETIME", k) == rr.execute_command("PEXPIRETIME", k), k
    # the replica refuses SL.SYNC: it writes
    with pytest.raises(redis.exceptions.ResponseError, match="read only replica"):
        rr.execute_command(*sync_args("sync:c", config, syncs[0]))
    got = _aof_commands(primary.workdir)
    assert got == want
    assert not any(c[0].upper() == b"SL.SYNC" for c in got)
    # a record whose expiry is past is written with it all the same
    past = T0 - 86400 * SEC
    p.execute_command(*sync_args("sync:past", config, (past, 0, 0, 1, 0, 0)))
    last = _aof_commands(primary.workdir)[len(want)]
    assert last[:2] == [b"SET", b"sync:past"] and last[3] == b"PXAT"
    assert int(last[4]) == expiry_ms(config, record(last[2])) < time.time_ns() // 10 ** 6
    assert p.exists("sync:past") == 0
    p.close()
    rr.close()


def test_inside_multi_and_a_script(server, key):
    r = server.client()
    pipe = r.pipeline(transaction=True)
    s = (T0 + SHIFT, 0, 0, 5, 0, 0)
    pipe.execute_command(*sync_args(key, GOOD_CONFIG, s))
    pipe.execute_command(*sync_args(key, GOOD_CONFIG, (s[0] + 1, 1, 0, 5, 0, 0)))
    a, b = pipe.execute()
    got = r.eval("return redis.call('SL.SYNC', KEYS[1], unpack(ARGV))", 1, key + ":lua",
                 *sync_args(key, GOOD_CONFIG, s)[2:])
    assert got == a
    assert r.get(key + ":lua")[:4] == HEADER
    r.close()


# ---- 8. the command's metadata, and Redis Cluster ----

def test_flags_and_key_positions(server):
    c = server.conn()
    try:
        info = c.call("COMMAND", "INFO", "sl.sync")[0]
        assert c.call("COMMAND", "GETKEYS", *sync_args("k", GOOD_CONFIG, (0, 0, 0, 0, 0, 0))) \
            == [b"k"]
    finally:
        c.close()
    flags = {f.decode() if isinstance(f, bytes) else str(f) for f in info[2]}
    assert {"write", "denyoom", "fast"} <= flags and "readonly" not in flags, flags
    assert info[3:6] == [1, 1, 1]


def test_resp3_reply_is_three_integers(server, key):
    c = server.conn(3)
    try:
        reply = c.call(*sync_args(key, GOOD_CONFIG, (T0 + SHIFT, 0, 0, 10, 0, 0)))
    finally:
        c.close()
    assert isinstance(reply, list) and len(reply) == 3 and all(isinstance(x, int) for x in reply)


def test_cluster_routes_by_the_key(cluster):  # noqa: F811 (the fixture)
    nodes, clients = cluster
    owner = _owners(nodes)
    key = "sync:%s" % uuid.uuid4().hex[:8]
    slot = clients[0].execute_command("CLUSTER", "KEYSLOT", key)
    n = owner[slot]
    args = sync_args(key, GOOD_CONFIG, (T0 + SHIFT, 0, 0, 1, 0, 0))
    assert len(clients[n].execute_command(*args)) == 3
    with pytest.raises(redis.exceptions.ResponseError, match="MOVED %d " % slot):
        clients[(n + 1) % 3].execute_command(*args)
    assert clients[(n + 1) % 3].dbsize() == 0
