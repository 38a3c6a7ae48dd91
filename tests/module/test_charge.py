"""SL.DECIDE CHARGE in the module: a charge is replicated as its effect (the state it
leaves, SET ... PXAT), never as the command, so a replica holds the primary's bytes,
debt and all; and a charge of 0 writes, and so sends, nothing."""

import time

import pytest

from conftest import wait_for

HOUR = 3600 * 10**9


def _decide(r, op, key, algo, cost, a=10, b=HOUR):
    return r.execute_command("SL.DECIDE", op, "0", 1, key, algo, a, b, 0, cost, 0, 0, 0)


def test_a_charge_reaches_the_replica_as_its_effect(replicated):
    p, rr = replicated
    algos = ("gcra", "token_bucket", "leaky_bucket", "fixed_window", "sliding_window")
    for algo in algos:
        got = _decide(p, "CHARGE", "ch:" + algo, algo, 25)
        assert got[:4] == [-1, 1, 10, 0], (algo, got)
    assert p.execute_command("WAIT", 1, 10000) == 1
    for algo in algos:
        k = "ch:" + algo
        assert p.dump(k) is not None and p.dump(k) == rr.dump(k), k
        assert p.execute_command("PEXPIRETIME", k) == rr.execute_command("PEXPIRETIME", k), k
        got = rr.execute_command("SL.PEEK", k, 10, 3600, "ALGORITHM", algo, "COST", 1)
        assert got[got.index(b"allowed") + 1] == 0, (k, got)
    offset = p.info("replication")["master_repl_offset"]
    for algo in algos:
        assert _decide(p, "CHARGE", "ch:" + algo, algo, 0)[:2] == [-1, 1]
    assert _decide(p, "CHARGE", "ch:absent", "gcra", 0)[:2] == [-1, 1]
    assert p.exists("ch:absent") == 0
    assert p.info("replication")["master_repl_offset"] == offset
