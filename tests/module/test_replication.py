"""Replication, RDB and AOF: the module sends effects (the resulting state), never the
time-dependent command, so a replica and a restarted server hold the primary's bytes."""

import glob
import os
import time

import pytest

from conftest import wait_for


def _drive(r, prefix):
    """Takes of every kind on the primary; returns the keys that must hold state."""
    keys = []
    for algo in ("gcra", "token_bucket", "leaky_bucket", "fixed_window", "sliding_log",
                 "sliding_window"):
        k = "%s:%s" % (prefix, algo)
        for _ in range(3):
            r.execute_command("SL.TAKE", k, 5, 3600, "ALGORITHM", algo)
        keys.append(k)
    k = prefix + ":cell"
    for _ in range(5):
        r.execute_command("CL.THROTTLE", k, 3, 1, 60)
    keys.append(k)
    a, b = "{%s}:many:a" % prefix, "{%s}:many:b" % prefix
    r.execute_command("SL.TAKEMANY", 2, a, b, "LIMIT", 3, 60, "LIMIT", 10, 60, "COST", 2)
    keys += [a, b]
    lk = prefix + ":lease"
    lease = r.execute_command("SL.ACQUIRE", lk, 3, 600000)
    r.execute_command("SL.ACQUIRE", lk, 3, 600000)
    r.execute_command("SL.RELEASE", lk, lease)
    keys.append(lk)
    gone = prefix + ":reset"
    r.execute_command("SL.TAKE", gone, 5, 3600)
    r.execute_command("SL.RESET", gone)
    return keys, gone


def test_replica_holds_the_primarys_bytes(make_server):
    primary = make_server("primary")
    replica = make_server("replica", start=False)
    replica.args = ["--replicaof", "127.0.0.1", str(primary.port)]
    replica.start()
    p, rr = primary.client(), replica.client()
    wait_for(lambda: rr.info("replication").get("master_link_status") == "up", "the replica link")
    keys, gone = _drive(p, "rep")
    assert p.execute_command("WAIT", 1, 10000) == 1
    for k in keys:
        dp, dr = p.dump(k), rr.dump(k)
        assert dp is not None, k
        assert dp == dr, "replica's %s differs from the primary's" % k
        # the same absolute expiry: SET ... PXAT carries the primary's instant
        assert p.execute_command("PEXPIRETIME", k) == rr.execute_command("PEXPIRETIME", k), k
    assert rr.exists(gone) == 0
    # a rejection writes nothing, so nothing is sent
    offset = p.info("replication")["master_repl_offset"]
    for _ in range(10):
        assert p.execute_command("CL.THROTTLE", "rep:cell", 3, 1, 60)[0] == 1
        p.execute_command("SL.PEEK", "rep:gcra", 5, 3600)
    assert p.info("replication")["master_repl_offset"] == offset
    # the replica refuses takes (they write)
    with pytest.raises(Exception, match="read only replica"):
        rr.execute_command("SL.TAKE", "x", 1, 60)
    assert rr.execute_command("SL.PEEK", "rep:gcra", 5, 3600)[1] == 1
    p.close()
    rr.close()


def test_replica_holds_the_primarys_bytes_after_multi_and_scripts(make_server):
    # In MULTI/EXEC and in a script, the effects of several commands wait until the end
    # to be sent, holding the key names they were given (the commands' own arguments).
    primary = make_server("primary")
    replica = make_server("replica", start=False)
    replica.args = ["--replicaof", "127.0.0.1", str(primary.port)]
    replica.start()
    p, rr = primary.client(), replica.client()
    wait_for(lambda: rr.info("replication").get("master_link_status") == "up", "the replica link")
    pipe = p.pipeline(transaction=True)
    for _ in range(3):
        pipe.execute_command("CL.THROTTLE", "tx:cell", 5, 1, 60)
    pipe.execute_command("SL.TAKE", "tx:window", 5, 3600, "ALGORITHM", "fixed_window")
    pipe.execute_command("SL.TAKE", "tx:gone", 5, 3600)
    pipe.execute_command("SL.RESET", "tx:gone")
    replies = pipe.execute()
    assert [x[2] for x in replies[:3]] == [5, 4, 3] and replies[-1] == 1
    script = ("redis.call('CL.THROTTLE', KEYS[1], 5, 1, 60) "
              "redis.call('CL.THROTTLE', KEYS[1], 5, 1, 60) "
              "return redis.call('CL.THROTTLE', KEYS[2], 5, 1, 60)")
    assert p.eval(script, 2, "lua:a", "lua:b")[2] == 5
    assert p.execute_command("WAIT", 1, 10000) == 1
    for k in ("tx:cell", "tx:window", "lua:a", "lua:b"):
        dp = p.dump(k)
        assert dp is not None and dp == rr.dump(k), k
        assert p.execute_command("PEXPIRETIME", k) == rr.execute_command("PEXPIRETIME", k), k
    assert p.exists("tx:gone") == 0 and rr.exists("tx:gone") == 0
    assert p.execute_command("CL.THROTTLE", "lua:a", 5, 1, 60)[2] == 3
    p.close()
    rr.close()


def _drain(r, key):
    for _ in range(3):
        assert r.execute_command("CL.THROTTLE", key, 2, 1, 3600)[0] == 0
    assert r.execute_command("CL.THROTTLE", key, 2, 1, 3600)[0] == 1


def test_rdb_restart_keeps_a_drained_key_drained(make_server):
    s = make_server("rdb")
    r = s.client()
    _drain(r, "drained")
    r.execute_command("SL.TAKE", "window", 2, 3600, "ALGORITHM", "fixed_window")
    before = {k: r.dump(k) for k in ("drained", "window")}
    assert r.save()
    r.close()
    assert s.stop() == 0
    s.start(port=s.port)
    r = s.client()
    for k, v in before.items():
        assert r.dump(k) == v, k
    reply = r.execute_command("CL.THROTTLE", "drained", 2, 1, 3600)
    assert reply[0] == 1 and reply[2] == 0, reply
    assert r.execute_command("SL.TAKE", "window", 2, 3600, "ALGORITHM", "fixed_window")[1] == 1
    assert r.execute_command("SL.TAKE", "window", 2, 3600, "ALGORITHM", "fixed_window")[1] == 0
    r.close()


def test_aof_restart_keeps_a_drained_key_drained(make_server):
    s = make_server("aof", args=["--appendonly", "yes", "--appendfsync", "always"])
    r = s.client()
    _drain(r, "drained")
    lease = r.execute_command("SL.ACQUIRE", "lease", 1, 600000)
    before = {k: r.dump(k) for k in ("drained", "lease")}
    r.close()
    # the AOF holds effects: SET ... PXAT, never the time-dependent commands
    text = b""
    for f in glob.glob(os.path.join(s.workdir, "appendonlydir", "*.incr.aof")):
        with open(f, "rb") as fh:
            text += fh.read()
    assert b"PXAT" in text and b"SET" in text
    assert b"CL.THROTTLE" not in text.upper() and b"SL.ACQUIRE" not in text.upper()
    os.kill(s.proc.pid, 9)  # no shutdown save: the AOF alone must restore the state
    s.proc.wait(timeout=10)
    s.start(port=s.port)
    r = s.client()
    for k, v in before.items():
        assert r.dump(k) == v, k
    assert r.execute_command("CL.THROTTLE", "drained", 2, 1, 3600)[0] == 1
    assert r.execute_command("SL.ACQUIRE", "lease", 1, 600000) is None
    assert r.execute_command("SL.RELEASE", "lease", lease) == 1
    # and after an AOF rewrite (Redis writes each string back as SET + expiry)
    r.execute_command("SL.ACQUIRE", "lease", 1, 600000)
    assert r.bgrewriteaof()
    wait_for(lambda: r.info("persistence")["aof_rewrite_in_progress"] == 0 and
          r.info("persistence")["aof_rewrite_scheduled"] == 0, "the AOF rewrite")
    r.close()
    os.kill(s.proc.pid, 9)
    s.proc.wait(timeout=10)
    s.start(port=s.port)
    r = s.client()
    assert r.execute_command("CL.THROTTLE", "drained", 2, 1, 3600)[0] == 1
    assert r.execute_command("SL.ACQUIRE", "lease", 1, 600000) is None
    r.close()


def test_dump_restore_moves_a_limit(make_server):
    """What MIGRATE (and so cluster resharding) does: the state moves with the key, with
    its expiry, and the other server goes on from it."""
    a, b = make_server("a"), make_server("b")
    ra, rb = a.client(), b.client()
    _drain(ra, "moving")
    payload = ra.dump("moving")
    at = ra.execute_command("PEXPIRETIME", "moving")
    rb.execute_command("RESTORE", "moving", at, payload, "ABSTTL")
    assert rb.get("moving") == ra.get("moving")
    assert rb.execute_command("PEXPIRETIME", "moving") == at
    assert rb.execute_command("CL.THROTTLE", "moving", 2, 1, 3600)[0] == 1
    ra.close()
    rb.close()


def _aof_commands(workdir):
    """Every command of the incremental AOF files, as lists of bytes, in order, without
    the SELECT, MULTI and EXEC that Redis adds around them."""
    out = []
    for f in sorted(glob.glob(os.path.join(workdir, "appendonlydir", "*.incr.aof"))):
        with open(f, "rb") as fh:
            data = fh.read()
        i = 0
        while i < len(data):
            assert data[i:i + 1] == b"*", data[i:i + 40]
            j = data.index(b"\r\n", i)
            argc, i = int(data[i + 1:j]), j + 2
            cmd = []
            for _ in range(argc):
                assert data[i:i + 1] == b"$", data[i:i + 40]
                j = data.index(b"\r\n", i)
                n, i = int(data[i + 1:j]), j + 2
                cmd.append(data[i:i + n])
                assert data[i + n:i + n + 2] == b"\r\n"
                i += n + 2
            if cmd[0].upper() not in (b"SELECT", b"MULTI", b"EXEC"):
                out.append(cmd)
    return out


def test_aof_holds_each_effect_exactly(make_server):
    s = make_server("effects", args=["--appendonly", "yes", "--appendfsync", "always"])
    r = s.client()
    odd = b"odd key \r\n\x00\xff"  # any bytes: the name is replicated as the client sent it
    want = []

    def effect(key):
        want.append([b"SET", key, r.get(key), b"PXAT",
                     str(r.execute_command("PEXPIRETIME", key)).encode()])

    for _ in range(3):
        assert r.execute_command("CL.THROTTLE", odd, 2, 1, 3600)[0] == 0
        effect(odd)
    assert r.execute_command("CL.THROTTLE", odd, 2, 1, 3600)[0] == 1  # no effect: nothing sent
    r.execute_command("SL.TAKE", "window", 2, 3600, "ALGORITHM", "fixed_window")
    effect(b"window")
    r.execute_command("SL.TAKEMANY", 2, "{m}a", "{m}b", "LIMIT", 3, 60, "LIMIT", 10, 60)
    effect(b"{m}a")
    effect(b"{m}b")
    assert r.execute_command("SL.RESET", "window") == 1
    want.append([b"DEL", b"window"])
    got = _aof_commands(s.workdir)
    assert got == want
    for cmd in got:
        if cmd[0] == b"SET":  # an expiry in Unix ms, as Redis writes its own
            assert cmd[4].isdigit() and not cmd[4].startswith(b"0")
    r.close()
