"""The Lua scripts (src/redis_module/lua/) against the module: the cases of the shared
table that they cover give the same answers, and side by side on one server the two
agree decision by decision."""

import os
import random
import re
import uuid

import pytest
import redis

import command_cases
from conftest import ROOT

LUA = os.path.join(ROOT, "src", "redis_module", "lua")
SCRIPTS = {"cell": "cell.lua", "gcra": "gcra.lua", "token_bucket": "token_bucket.lua",
           "fixed_window": "fixed_window.lua"}
UNITS = {"ms": 1, "s": 1000, "m": 60000, "h": 3600000, "d": 86400000, "w": 604800000}


@pytest.fixture(scope="module")
def shas(server):
    c = server.client()
    out = {}
    for name, f in SCRIPTS.items():
        with open(os.path.join(LUA, f)) as fh:
            out[name] = c.script_load(fh.read())
    c.close()
    return out


def period_ms(text):
    m = re.fullmatch(r"(\d+)(ms|s|m|h|d|w)?", text)
    return int(m.group(1)) * UNITS[m.group(2) or "s"]


def to_lua(argv, shas):
    """The EVALSHA that does what argv does, or None when no script covers it."""
    cmd = argv[0].upper()
    if cmd == "CL.THROTTLE":
        return ["EVALSHA", shas["cell"], 1] + argv[1:]
    if cmd != "SL.TAKE" or len(argv) < 4:
        return None
    opts = {"BURST": "", "COST": "1", "ALGORITHM": "gcra"}
    rest = argv[4:]
    for i in range(0, len(rest), 2):
        opts[rest[i].upper()] = rest[i + 1]
    algo = opts["ALGORITHM"].lower()
    if algo not in shas:
        return None
    lua = ["EVALSHA", shas[algo], 1, argv[1], argv[2], period_ms(argv[3]), opts["BURST"],
           opts["COST"]]
    if "UTCOFFSET" in opts:
        if algo != "fixed_window":
            return None
        text = opts["UTCOFFSET"]
        digits = text[1:].replace(":", "")
        seconds = int(digits[:2]) * 3600 + (int(digits[2:]) * 60 if len(digits) > 2 else 0)
        lua.append(-seconds if text[0] == "-" else seconds)
    return lua


def _covered(steps):
    for argv, want in steps:
        if isinstance(want, command_cases.Err):
            return False
        args = command_cases.substitute(argv, "k", "k2", None)
        if to_lua(args, {"cell": 1, "gcra": 1, "token_bucket": 1, "fixed_window": 1}) is None:
            return False
    return True


LUA_CASES = [(n, s) for n, s in command_cases.CASES if _covered(s)]


def test_the_scripts_cover_the_reference_algorithms():
    names = {n for n, _ in LUA_CASES}
    assert {"cell_readme", "cell_reference_at_zero", "take_doc_example", "take_cost",
            "algorithm_token_bucket_admits_its_limit", "algorithm_fixed_window_admits_its_limit",
            } <= names, names


@pytest.mark.parametrize("name,steps", LUA_CASES, ids=[n for n, _ in LUA_CASES])
def test_lua_case(server, shas, name, steps):
    c = server.conn()

    def call(*args):
        lua = to_lua(list(args), shas)
        c.send_command(*lua)
        return c.read_reply()

    from respclient import Error
    command_cases.run_case(call, lambda r: r.message if isinstance(r, Error) else None,
                           name, steps, "lua-" + uuid.uuid4().hex[:8])
    c.close()


@pytest.mark.parametrize("algo", ["gcra", "token_bucket", "fixed_window", "cell"])
def test_side_by_side(server, shas, algo):
    """The same random takes on a module key and a Lua key, one after the other:
    the same decision each time (durations within the few ms between the calls)."""
    r = server.client()
    rnd = random.Random(algo)
    k = "sbs:%s:%s" % (algo, uuid.uuid4().hex[:8])
    for step in range(200):
        # periods of an hour: no token comes back between the two calls of a step
        limit, period = rnd.choice([(5, "3600"), (7, "1h"), (100, "1h")]) if step == 0 else (limit, period)
        cost = rnd.choice([0, 1, 1, 1, 2, 3, 9])
        if algo == "cell":
            argv = ["CL.THROTTLE", k + ":m", limit - 1, limit, 3600, cost]
        else:
            argv = ["SL.TAKE", k + ":m", limit, period, "COST", cost, "ALGORITHM", algo]
        mod = r.execute_command(*argv)
        lua_argv = to_lua([str(a) for a in argv], shas)
        lua_argv[3] = k + ":l"
        lua = r.execute_command(*lua_argv)
        if algo == "cell":
            assert mod == lua, (step, argv, mod, lua)
            continue
        m, l = command_cases.as_map(mod), command_cases.as_map(lua)
        for f in ("allowed", "limit", "remaining"):
            assert m[f] == l[f], (step, f, m, l)
        for f in ("retry_after_ms", "reset_after_ms"):
            assert abs(m[f] - l[f]) <= 50, (step, f, m, l)
    r.close()


def test_lua_replicates_effects_and_expires(server, shas):
    r = server.client()
    k = "lua-exp:" + uuid.uuid4().hex[:8]
    r.evalsha(shas["gcra"], 1, k, 1, 200)
    assert 0 < r.pttl(k) <= 201  # PXAT is rounded up to the next millisecond
    with pytest.raises(redis.exceptions.ResponseError, match="limit must be"):
        r.evalsha(shas["gcra"], 1, k + "x", 0, 200)
    assert r.exists(k + "x") == 0
    r.close()


@pytest.mark.parametrize("period,offset", [("1d", None), ("1d", "-05:00"), ("1w", "+05:30"),
                                           ("7h", "+09:00"), ("1h", "-03:30")])
def test_fixed_windows_on_the_clock_side_by_side(server, shas, period, offset):
    """fixed_window.lua puts windows where the module does: at the UTC offset, weeks
    from Monday, periods that do not divide a day counted from Monday 1970-01-05."""
    r = server.client()
    k = "fwc:%s" % uuid.uuid4().hex[:8]
    argv = ["SL.TAKE", k + ":m", 3, period, "ALGORITHM", "fixed_window"]
    if offset:
        argv += ["UTCOFFSET", offset]
    mod = command_cases.as_map(r.execute_command(*argv))
    lua_argv = to_lua([str(a) for a in argv], shas)
    lua_argv[3] = k + ":l"
    lua = command_cases.as_map(r.execute_command(*lua_argv))
    assert mod["remaining"] == lua["remaining"] == 2
    assert abs(mod["reset_after_ms"] - lua["reset_after_ms"]) <= 50, (mod, lua)


@pytest.mark.parametrize("argv", [
    ["SL.TAKE", "k", "10", "60", "BURST", "0"],
    ["SL.TAKE", "k", "10", "60", "BURST", "-1"],
    ["SL.TAKE", "k", "10", "60", "BURST", "0", "ALGORITHM", "token_bucket"],
    ["SL.TAKE", "k", "10", "60", "BURST", "0", "ALGORITHM", "fixed_window"],
    ["SL.TAKE", "k", "0", "60", "BURST", "2"],
    ["CL.THROTTLE", "k", "1", "0", "60"],
    ["CL.THROTTLE", "k", "1", "5", "0"],
    ["CL.THROTTLE", "k", "1", "2000000000", "1"],
    ["CL.THROTTLE", "k", "-1", "5", "60"],
    ["CL.THROTTLE", "k", "1", "-5", "60"],
])
def test_the_scripts_refuse_what_the_module_refuses_in_its_words(server, shas, argv):
    """burst 0 (0 used to mean "the limit" in the scripts) and redis-cell's zero rate:
    the script's error line is the module's, byte for byte."""
    c = server.conn()
    from respclient import Error
    key = "lua-err:" + uuid.uuid4().hex[:8]
    argv = [key if a == "k" else a for a in argv]
    c.send_command(*argv)
    mod = c.read_reply()
    c.send_command(*to_lua(argv, shas))
    lua = c.read_reply()
    c.close()
    assert isinstance(mod, Error), mod
    assert isinstance(lua, Error) and lua.message == mod.message, (mod, lua)


def test_an_empty_burst_argument_is_the_limit(server, shas):
    """ "" stands for BURST not given, so that a cost can follow it."""
    r = server.client()
    key = "lua-burst:" + uuid.uuid4().hex[:8]
    got = command_cases.as_map(r.execute_command("EVALSHA", shas["gcra"], 1, key, 10, 60000, "", 3))
    assert (got["allowed"], got["limit"], got["remaining"]) == (1, 10, 7), got
    got = command_cases.as_map(r.execute_command("EVALSHA", shas["gcra"], 1, key + "b", 10, 60000, 1))
    assert (got["allowed"], got["limit"], got["remaining"]) == (1, 1, 0), got
    r.close()
