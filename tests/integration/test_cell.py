"""CL.THROTTLE, answered exactly as redis-cell answers it (docs/commands.md, DESIGN.md)."""

import pytest
import redis

from respclient import Error


def throttle(r, *args):
    return r.execute_command("CL.THROTTLE", *args)


def test_readme_example(r, key):
    # README / docs/commands.md: CL.THROTTLE user123 15 30 60 1 -> 0 16 15 -1 2
    assert throttle(r, key, 15, 30, 60, 1) == [0, 16, 15, -1, 2]


def test_quantity_defaults_to_one(r, key):
    assert throttle(r, key, 15, 30, 60) == [0, 16, 15, -1, 2]
    assert throttle(r, key, 15, 30, 60) == [0, 16, 14, -1, 4]


def test_drain_to_limited(r, key):
    # limit 16, T = 60/30 = 2 s: 16 at once, then the 17th waits T = 2 s, and the key is
    # full again 16 * 2 = 32 s after the last admitted one. The test runs in well under
    # a second, so the elapsed milliseconds only round up to the same whole seconds.
    for i in range(16):
        assert throttle(r, key, 15, 30, 60, 1) == [0, 16, 15 - i, -1, 2 * (i + 1)], "take %d" % (i + 1)
    assert throttle(r, key, 15, 30, 60, 1) == [1, 16, 0, 2, 32]
    # a rejection consumes nothing: the same answer again
    assert throttle(r, key, 15, 30, 60, 1) == [1, 16, 0, 2, 32]
    # a peek (quantity 0) on a drained key: allowed, nothing left, nothing consumed
    assert throttle(r, key, 15, 30, 60, 0) == [0, 16, 0, -1, 32]


def test_quantity_above_the_limit_is_never_allowed(r, key):
    # redis-cell: a quantity above the limit is limited with retry_after -1 (never),
    # and it consumes nothing (reference case step 0 of tests/testdata/gcra_cases.tsv)
    assert throttle(r, key, 4, 1, 1, 6) == [1, 5, 5, -1, 0]
    assert throttle(r, key, 4, 1, 1, 1) == [0, 5, 4, -1, 1]


def test_reference_sequence_at_time_zero(r, key):
    # the first rows of tests/testdata/gcra_cases.tsv, all at virtual time 0 (the rest of
    # the file needs a virtual clock: the unit tests run it)
    want = [
        (6, [1, 5, 5, -1, 0]),
        (1, [0, 5, 4, -1, 1]),
        (1, [0, 5, 3, -1, 2]),
        (1, [0, 5, 2, -1, 3]),
        (1, [0, 5, 1, -1, 4]),
        (1, [0, 5, 0, -1, 5]),
        (1, [1, 5, 0, 1, 5]),
    ]
    for step, (qty, reply) in enumerate(want):
        assert throttle(r, key, 4, 1, 1, qty) == reply, "step %d" % step


def test_quantity_takes_several(r, key):
    assert throttle(r, key, 9, 10, 10, 4) == [0, 10, 6, -1, 4]
    assert throttle(r, key, 9, 10, 10, 7) == [1, 10, 6, 1, 4]
    assert throttle(r, key, 9, 10, 10, 6) == [0, 10, 0, -1, 10]


def test_keys_are_independent(r, key):
    assert throttle(r, key + ":a", 0, 1, 60) == [0, 1, 0, -1, 60]
    assert throttle(r, key + ":a", 0, 1, 60) == [1, 1, 0, 60, 60]
    assert throttle(r, key + ":b", 0, 1, 60) == [0, 1, 0, -1, 60]


def test_command_name_is_case_insensitive(r, key):
    assert r.execute_command("cl.throttle", key, 15, 30, 60) == [0, 16, 15, -1, 2]
    assert r.execute_command("Cl.Throttle", key, 15, 30, 60) == [0, 16, 14, -1, 4]


def test_reply_is_an_array_of_integers_in_resp3_too(server, key):
    with server.conn() as c:
        hello = c.call("HELLO", "3")
        assert isinstance(hello, dict)
        reply = c.call("CL.THROTTLE", key, 15, 30, 60, 1)
        assert type(reply) is list and reply == [0, 16, 15, -1, 2]


@pytest.mark.parametrize("args", [
    (), ("k",), ("k", 15), ("k", 15, 30), ("k", 15, 30, 60, 1, 2),
])
def test_wrong_arity(raw, args):
    raw.send_command("CL.THROTTLE", *args)
    err = raw.read_reply()
    assert isinstance(err, Error)
    assert err.message == "ERR wrong number of arguments for 'cl.throttle' command"
    assert raw.call("PING") == "PONG"  # the connection stays open


@pytest.mark.parametrize("args", [
    ("x", 30, 60), (15, "x", 60), (15, 30, "x"), (15, 30, 60, "x"),
    ("1.5", 30, 60), (15, 30, "60s"), ("", 30, 60), ("99999999999999999999", 30, 60),
])
def test_non_integer_arguments(raw, key, args):
    raw.send_command("CL.THROTTLE", key, *args)
    err = raw.read_reply()
    assert isinstance(err, Error), err
    assert err.message.startswith("ERR "), err.message
    assert "integer" in err.message, err.message
    # nothing was stored under the key by the failed command
    assert raw.call("CL.THROTTLE", key, 15, 30, 60) == [0, 16, 15, -1, 2]


@pytest.mark.parametrize("args", [(-1, 30, 60), (15, -30, 60), (15, 30, -60), (15, 30, 60, -1)])
def test_negative_arguments(raw, key, args):
    raw.send_command("CL.THROTTLE", key, *args)
    err = raw.read_reply()
    assert isinstance(err, Error) and err.message.startswith("ERR "), err


def test_zero_count_or_period_is_an_error(raw, key):
    # redis-cell's own words (src/cell/mod.rs), without ERR, as redis-cell replies
    for args in ((15, 0, 60), (15, 30, 0)):
        raw.send_command("CL.THROTTLE", key, *args)
        err = raw.read_reply()
        assert isinstance(err, Error), (args, err)
        assert err.message == "Cell error: Zero rates are not supported", (args, err)


def test_rate_too_high(raw, key):
    # more than a million per second per key
    raw.send_command("CL.THROTTLE", key, 10, 2000001, 1)
    err = raw.read_reply()
    assert isinstance(err, Error) and err.message.startswith("ERR rate is too high"), err


def test_redis_py_raises_on_errors(r):
    with pytest.raises(redis.ResponseError, match="wrong number of arguments for 'cl.throttle' command"):
        r.execute_command("CL.THROTTLE", "k")
