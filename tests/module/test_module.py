"""The module itself: it loads, registers the table's commands with the right flags
and key positions, keeps states in string values that expire by themselves, refuses
values it did not write, and writes nothing on bad input."""

import struct
import time

import pytest
import redis

from respclient import Error

COMMANDS = ["cl.throttle", "sl.take", "sl.peek", "sl.takemany", "sl.policy", "sl.reset",
            "sl.acquire", "sl.release"]


def test_module_is_listed(r):
    mods = r.execute_command("MODULE", "LIST")
    names = [dict(zip(m[0::2], m[1::2]))[b"name"] for m in mods]
    assert b"sluice" in names


def _info(server, name):
    """COMMAND INFO through the raw client (redis-py reshapes that reply)."""
    c = server.conn()
    try:
        return c.call("COMMAND", "INFO", name)[0]
    finally:
        c.close()


@pytest.mark.parametrize("name", COMMANDS)
def test_commands_have_flags_and_keys(server, name):
    info = _info(server, name)
    assert info is not None, "%s is not registered" % name
    flags = {f.decode() if isinstance(f, bytes) else str(f) for f in info[2]}
    if name == "sl.peek":
        assert {"readonly", "fast"} <= flags and "write" not in flags
    else:
        assert {"write", "denyoom", "fast"} <= flags, flags
    if name == "sl.takemany":
        assert "movablekeys" in flags and info[3:6] == [0, 0, 0]
    elif name == "sl.policy":
        assert info[3:6] == [2, 2, 1]
    elif name == "sl.reset":
        assert info[3:6] == [1, -1, 1]
    else:
        assert info[3:6] == [1, 1, 1]


def test_no_gcra_command(server):
    # Redis 8.8's native GCRA is Redis's own: the module never registers that name
    assert _info(server, "gcra") is None


def test_sl_top_says_it_is_sluiced_s(r):
    # the top keys are counted where sluiced decides: the module answers why it has none
    with pytest.raises(redis.ResponseError) as e:
        r.execute_command("SL.TOP", "COUNT", 5)
    assert "SL.TOP is sluiced's: the module keeps no top keys" in str(e.value)


def test_getkeys_finds_the_keys(server):
    c = server.conn()
    assert c.call("COMMAND", "GETKEYS", "SL.TAKEMANY", 2, "a", "b", "LIMIT", 1, 60,
                  "LIMIT", 2, 60) == [b"a", b"b"]
    assert c.call("COMMAND", "GETKEYS", "SL.RESET", "a", "b", "c") == [b"a", b"b", b"c"]
    assert c.call("COMMAND", "GETKEYS", "CL.THROTTLE", "k", 1, 2, 3) == [b"k"]
    c.close()


def test_value_format_and_expiry(r, key):
    r.execute_command("SL.TAKE", key, 10, 60)
    v = r.get(key)
    # magic, version 1, algorithm 0 (gcra), reserved, then GCRA's 16-byte state
    assert v[:4] == b"\xf1\x01\x00\x00" and len(v) == 20
    tat, frac = struct.unpack("<qq", v[4:])
    now_ns = time.time_ns()
    assert now_ns < tat <= now_ns + 6_000_000_000 + 1_000_000_000
    # the key expires when the state is "never seen" again: at the TAT, in Unix ms
    pexpiretime = r.execute_command("PEXPIRETIME", key)
    assert pexpiretime == -(-tat // 1_000_000)
    assert r.type(key) == b"string"


def test_key_expires_by_itself(r, key):
    r.execute_command("SL.TAKE", key, 1, "200ms")
    assert r.exists(key) == 1
    deadline = time.monotonic() + 5
    while r.exists(key) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert r.exists(key) == 0, "the key outlived its state"
    assert r.execute_command("SL.TAKE", key, 1, "200ms")[1] == 1


def test_rejection_and_peek_write_nothing(r, key):
    r.execute_command("SL.TAKE", key, 1, 3600)
    before = r.dump(key)
    assert r.execute_command("SL.TAKE", key, 1, 3600)[1] == 0
    assert r.execute_command("SL.PEEK", key, 1, 3600)[1] == 0
    assert r.dump(key) == before


@pytest.mark.parametrize("setup", [
    lambda r, k: r.set(k, "hello"),
    lambda r, k: r.set(k, 12345),
    lambda r, k: r.rpush(k, "x"),
    lambda r, k: r.hset(k, "f", "v"),
    lambda r, k: r.set(k, b""),
])
def test_wrongtype(r, key, setup):
    setup(r, key)
    before = r.dump(key)
    for cmd in (["SL.TAKE", key, 10, 60], ["SL.PEEK", key, 10, 60], ["CL.THROTTLE", key, 1, 1, 1],
                ["SL.ACQUIRE", key, 1, 1000], ["SL.RELEASE", key, "0000000000000001" + "00000001"],
                ["SL.TAKEMANY", 1, key, "LIMIT", 1, 60], ["SL.RESET", key]):
        with pytest.raises(redis.exceptions.ResponseError) as e:
            r.execute_command(*cmd)
        assert str(e.value).startswith("WRONGTYPE"), (cmd, e.value)
    assert r.dump(key) == before, "a refused command changed the key"


def test_wrongtype_anywhere_resets_nothing(r, key):
    a, b = "{%s}a" % key, "{%s}b" % key
    r.execute_command("SL.TAKE", a, 1, 3600)
    r.set(b, "user data")
    with pytest.raises(redis.exceptions.ResponseError, match="WRONGTYPE"):
        r.execute_command("SL.RESET", a, b)
    assert r.exists(a, b) == 2


def test_unknown_version_is_refused(r, key):
    r.set(key, b"\xf1\x02\x00\x00" + b"\x00" * 16)
    with pytest.raises(redis.exceptions.ResponseError, match="unknown format version"):
        r.execute_command("SL.TAKE", key, 10, 60)
    assert r.get(key) == b"\xf1\x02\x00\x00" + b"\x00" * 16


def _foreign_commands(key):
    """Every command that reads a key, once each, SL.DECIDE's ops among them."""
    g = ["gcra", 10, 60 * 10**9, 0, 1, 0, 0, 0]
    c = ["concurrency", 2, 10**9, 0, 1, 0, 0, 0]
    return [["SL.TAKE", key, 10, 60], ["SL.PEEK", key, 10, 60], ["CL.THROTTLE", key, 1, 1, 1],
            ["SL.ACQUIRE", key, 1, 1000], ["SL.RELEASE", key, "0000000000000001" + "00000001"],
            ["SL.TAKEMANY", 1, key, "LIMIT", 1, 60], ["SL.RESET", key],
            ["SL.DECIDE", "TAKE", "0", 1, key] + g, ["SL.DECIDE", "PEEK", "0", 1, key] + g,
            ["SL.DECIDE", "RESET", "0", 1, key], ["SL.DECIDE", "REFUND", "0", 1, key] + g,
            ["SL.DECIDE", "ACQUIRE", "00000000000000ab", 1, key] + c,
            ["SL.DECIDE", "RELEASE", "00000000000000ab", 1, key] + c]


@pytest.mark.parametrize("value,line", [
    (b"hello", "WRONGTYPE Operation against a key holding the wrong kind of value"),
    (b"\xf1\x02\x00\x00" + b"\x00" * 16,
     "ERR the key holds a sluice state of an unknown format version"),
], ids=["not-a-state", "unknown-version"])
def test_foreign_value_error_lines(server, key, value, line):
    """The module's own errors for what a key holds reach the client word for word,
    from every command, and the next command's errors are its own."""
    r = server.client()
    r.set(key, value)
    c = server.conn()
    try:
        for cmd in _foreign_commands(key):
            with pytest.raises(Error) as e:
                c.call(*cmd)
            assert e.value.message == line, cmd
            # An error that is not about the key: the shared table's words.
            with pytest.raises(Error) as e:
                c.call("SL.TAKE", key, 0, 60)
            assert e.value.message.startswith("ERR limit must be"), e.value.message
    finally:
        c.close()
    assert r.get(key) == value
    r.close()


def test_other_algorithm_is_refused_and_changes_nothing(r, key):
    r.execute_command("SL.TAKE", key, 1, 3600)
    before = r.get(key)
    with pytest.raises(redis.ResponseError, match="^WRONGTYPE key holds a state of another algorithm"):
        r.execute_command("SL.TAKE", key, 1, 3600, "ALGORITHM", "fixed_window")
    assert r.get(key) == before
    assert r.execute_command("SL.TAKE", key, 1, 3600)[1] == 0, "no fresh budget"
    assert r.execute_command("SL.RESET", key) == 1
    assert r.execute_command("SL.TAKE", key, 1, 3600, "ALGORITHM", "fixed_window")[1] == 1
    assert r.get(key)[2] == 3  # SL_FIXED_WINDOW


def test_resized_sliding_log_keeps_its_timestamps(r, key):
    for _ in range(5):
        r.execute_command("SL.TAKE", key, 5, 3600, "ALGORITHM", "sliding_log")
    d = r.execute_command("SL.TAKE", key, 8, 3600, "ALGORITHM", "sliding_log")
    assert (d[1], d[5]) == (1, 2), d
    assert len(r.get(key)) == 4 + 16 + 8 * 8


def test_sliding_log_and_leases_store_large_states(r, key):
    for _ in range(100):
        assert r.execute_command("SL.TAKE", key, 1000, 3600, "ALGORITHM", "sliding_log")[1] == 1
    assert len(r.get(key)) == 4 + 16 + 8 * 1000
    lk = key + ":lease"
    ids = [r.execute_command("SL.ACQUIRE", lk, 500, 60000) for _ in range(500)]
    assert all(ids) and len(set(ids)) == 500
    assert r.execute_command("SL.ACQUIRE", lk, 500, 60000) is None
    assert r.execute_command("SL.RELEASE", lk, ids[7]) == 1
    assert r.execute_command("SL.ACQUIRE", lk, 500, 60000) is not None


def test_bad_arguments_store_nothing(server):
    c = server.client()
    c.flushall()
    bad = [
        ["SL.TAKE", "k", "x", 60], ["SL.TAKE", "k", 10, 60, "ALGORITHM", "nope"],
        ["SL.TAKE", "k", 10, 60, "COST", -1], ["SL.TAKE", "k", 0, 60], ["SL.TAKE", "k", 10, "0"],
        ["SL.TAKE", "k", 10, 60, "BURST", -2], ["CL.THROTTLE", "k", -1, 1, 1],
        ["CL.THROTTLE", "k", 1, 1, 0], ["SL.TAKEMANY", 9, "k"], ["SL.TAKEMANY", 2, "k", "j", "LIMIT", 1, 60],
        ["SL.TAKEMANY", 2, "k", "j", "LIMIT", 1, 60, "LIMIT", 0, 60],
        ["SL.ACQUIRE", "k", 70000, 1000], ["SL.ACQUIRE", "k", 1, 1000, "WEIGHT", 0],
        ["SL.POLICY", "p", "k"], ["SL.TAKE", "k", 10, 60, "LIMIT", 1, 60],
        ["SL.TAKE", "k", 10, 60, "BURST", 0], ["SL.TAKE", "k", 10, 60, "BURST", 2, "BURST", 2],
        ["SL.TAKEMANY", 1, "k", "LIMIT", 1, 60, "COST", 1, "COST", 1],
        ["SL.ACQUIRE", "k", 2, 1000, "WEIGHT", 3], ["CL.THROTTLE", "k", 1, 0, 60],
    ]
    for cmd in bad:
        with pytest.raises(redis.exceptions.ResponseError) as e:
            c.execute_command(*cmd)
        assert str(e.value).startswith(("wrong number", "value is", "unknown", "syntax", "cost",
                                        "limit", "period", "burst", "numkeys", "max_in_flight",
                                        "weight", "ttl", "max_burst", "Cell error")), \
            (cmd, str(e.value))
    assert c.dbsize() == 0
    assert c.ping()
    c.close()


def test_raw_resp3_errors_and_null(server, key):
    c = server.conn(3)
    assert c.call("SL.ACQUIRE", key, 1, 1000) is not None
    assert c.call("SL.ACQUIRE", key, 1, 1000) is None
    c.send_command("SL.TAKE", key)
    e = c.read_reply()
    assert isinstance(e, Error) and e.message == "ERR wrong number of arguments for 'sl.take' command"
    c.close()


def test_module_arguments_are_refused(make_server):
    s = make_server("args", module_args=["bogus"], start=False)
    s.start(expect_ready=False)
    try:
        s.proc.wait(timeout=20)
    except Exception:
        s.kill()
        raise
    assert s.proc.returncode != 0
    assert "unknown module arguments" in s.log()


def test_multi_exec_and_lua_call(r, key):
    p = r.pipeline(transaction=True)
    p.execute_command("SL.TAKE", key, 2, 3600)
    p.execute_command("SL.TAKE", key, 2, 3600)
    p.execute_command("SL.TAKE", key, 2, 3600)
    out = p.execute()
    assert [o[1] for o in out] == [1, 1, 0]
    got = r.eval("return redis.call('CL.THROTTLE', KEYS[1], 1, 1, 60)", 1, key + ":lua")
    assert got == [0, 2, 1, -1, 60]
