"""SL.DECIDE REFUND in the module: a refund is replicated as its effect (the state it
leaves, SET ... PXAT, or DEL when it is "never seen" again), never as the command, so a
replica holds the primary's bytes; and a refund that gives nothing writes nothing."""

import time

import pytest

from conftest import wait_for

HOUR = 3600 * 10**9


def _decide(r, op, key, algo, cost, a=10, b=HOUR):
    return r.execute_command("SL.DECIDE", op, "0", 1, key, algo, a, b, 0, cost, 0, 0, 0)


def test_a_refund_reaches_the_replica_as_its_effect(replicated):
    p, rr = replicated
    algos = ("gcra", "token_bucket", "leaky_bucket", "fixed_window", "sliding_log",
             "sliding_window")
    for algo in algos:
        k = "rf:" + algo
        assert _decide(p, "TAKE", k, algo, 5)[:2] == [-1, 1]
        assert _decide(p, "REFUND", k, algo, 2) == 2
    assert p.execute_command("WAIT", 1, 10000) == 1
    for algo in algos:
        k = "rf:" + algo
        assert p.dump(k) is not None and p.dump(k) == rr.dump(k), k
        assert p.execute_command("PEXPIRETIME", k) == rr.execute_command("PEXPIRETIME", k), k
        # SL.DECIDE writes: a replica serves SL.PEEK only
        got = rr.execute_command("SL.PEEK", k, 10, 3600, "ALGORITHM", algo, "COST", 0)
        assert got[got.index(b"remaining") + 1] == 7, (k, got)
    # a refund that gives nothing writes, and so sends, nothing
    offset = p.info("replication")["master_repl_offset"]
    assert _decide(p, "REFUND", "rf:absent", "gcra", 3) == 0
    assert _decide(p, "REFUND", "rf:gcra", "token_bucket", 3) == 0
    assert p.info("replication")["master_repl_offset"] == offset
    # everything given back: the key goes, on the replica too
    for algo in algos:
        assert _decide(p, "REFUND", "rf:" + algo, algo, 10) == 3
    assert p.execute_command("WAIT", 1, 10000) == 1
    for algo in algos:
        assert p.exists("rf:" + algo) == 0 and rr.exists("rf:" + algo) == 0, algo
