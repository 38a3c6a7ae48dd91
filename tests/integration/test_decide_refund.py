"""SL.DECIDE REFUND on sluiced's own store, through redis-py: a take given back leaves
the key as if it had been refused, for the public commands too (docs/commands.md)."""

import pytest
import redis

MIN_NS = 60 * 10**9


def decide(r, op, key, *group):
    return r.execute_command("SL.DECIDE", op, "0", 1, key, *group)


def remaining(r, key, *limit):
    got = r.execute_command("SL.PEEK", key, *limit, "COST", 0)
    return got[got.index(b"remaining") + 1]


def test_a_take_given_back_is_as_if_refused(r, key):
    got = r.execute_command("SL.TAKE", key, 10, 60, "COST", 4)
    assert got[got.index(b"remaining") + 1] == 6
    assert decide(r, "REFUND", key, "gcra", 10, MIN_NS, 0, 4, 0, 0, 0) == 4
    assert remaining(r, key, 10, 60) == 10
    assert decide(r, "REFUND", key, "gcra", 10, MIN_NS, 0, 4, 0, 0, 0) == 0


def test_two_keys_taken_one_by_one_stay_all_or_nothing(r, key):
    """What the cluster backend does across slots: take a, take b; b refuses, so a's take
    is given back and neither key has spent anything."""
    a, b = key + ":a", key + ":b"
    ga = ["token_bucket", 5, MIN_NS, 0, 2, 0, 0, 0]
    gb = ["fixed_window", 1, MIN_NS, 0, 1, 0, 0, 0]
    assert decide(r, "TAKE", b, *gb)[:2] == [-1, 1]  # b is spent
    assert decide(r, "TAKE", a, *ga)[:2] == [-1, 1]
    assert decide(r, "TAKE", b, *gb)[:2] == [0, 0]   # refused
    assert decide(r, "REFUND", a, *ga) == 2
    assert remaining(r, a, 5, 60, "ALGORITHM", "token_bucket") == 5


@pytest.mark.parametrize("args,message", [
    (["REFUND", "0", 2, "a", "b"] + ["gcra", 5, MIN_NS, 0, 1, 0, 0, 0] * 2,
     "numkeys must be between 1 and 1"),
    (["REFUND", "0", 1, "a", "concurrency", 5, MIN_NS, 0, 1, 0, 0, 0],
     "ACQUIRE and RELEASE take a concurrency limit"),
    (["REFUND", "0", 1, "a", "gcra", 5, MIN_NS, 0, -1, 0, 0, 0],
     "cost must be a non-negative integer"),
    (["GIVEBACK", "0", 1, "a", "gcra", 5, MIN_NS, 0, 1, 0, 0, 0],
     "op is TAKE, PEEK, RESET, ACQUIRE, RELEASE, REFUND or CHARGE"),
])
def test_bad_refunds_are_refused(r, args, message):
    with pytest.raises(redis.ResponseError, match=message):
        r.execute_command("SL.DECIDE", *args)
    assert r.ping()
