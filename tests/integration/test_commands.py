"""The native SL.* commands (docs/commands.md), in RESP2 and RESP3.

`client` is a raw connection switched to the protocol under test with HELLO; every
decision is checked to be a map in RESP3 and a flat array in RESP2 before its fields are.
redis-py (RESP2 only in Debian 12's 4.3) drives the same commands in test_redis_py_*.
"""

import time

import pytest
import redis

from respclient import Error, as_map

DECISION = {"allowed", "limit", "remaining", "retry_after_ms", "reset_after_ms"}
ALGORITHMS = ["gcra", "token_bucket", "leaky_bucket", "fixed_window", "sliding_log", "sliding_window"]


@pytest.fixture(params=[2, 3], ids=["resp2", "resp3"])
def client(request, server):
    c = server.conn()
    hello = c.call("HELLO", str(request.param))
    assert as_map(hello)["proto"] == request.param
    c.proto = request.param
    yield c
    c.close()


def decision(c, *args):
    """Sends a command that answers a decision; checks the reply's RESP type for the
    connection's protocol and returns the fields as a dict."""
    reply = c.call(*args)
    check_map_type(c, reply)
    d = as_map(reply)
    assert DECISION <= set(d), "a decision lacks fields: %r" % (d,)
    for k in DECISION:
        assert isinstance(d[k], int), (k, d)
    return d


def check_map_type(c, reply):
    if c.proto == 3:
        assert isinstance(reply, dict), "RESP3 must answer a map, got %r" % (reply,)
    else:
        assert isinstance(reply, list), "RESP2 must answer a flat array, got %r" % (reply,)


def err(c, *args):
    c.send_command(*args)
    e = c.read_reply()
    assert isinstance(e, Error), "expected an error for %r, got %r" % (args, e)
    assert c.call("PING") == "PONG"  # an error leaves the connection open
    return e.message


# ---------------------------------------------------------------- SL.TAKE

def test_take_doc_example(client, key):
    d = decision(client, "SL.TAKE", key, 100, 60)
    assert d == {"allowed": 1, "limit": 100, "remaining": 99, "retry_after_ms": 0, "reset_after_ms": 600}


def test_take_drains_then_rejects(client, key):
    for i in range(3):
        d = decision(client, "SL.TAKE", key, 3, 3600)
        assert (d["allowed"], d["limit"], d["remaining"], d["retry_after_ms"]) == (1, 3, 2 - i, 0)
        # reset after: (i + 1) emission intervals of 1200 s, minus the few ms elapsed, rounded up
        assert 1200000 * (i + 1) - 5000 < d["reset_after_ms"] <= 1200000 * (i + 1)
    d = decision(client, "SL.TAKE", key, 3, 3600)
    assert (d["allowed"], d["limit"], d["remaining"]) == (0, 3, 0)
    assert 1200000 - 5000 < d["retry_after_ms"] <= 1200000
    assert 3600000 - 5000 < d["reset_after_ms"] <= 3600000


def test_take_burst(client, key):
    # 10 a minute (T = 6 s), at most 2 at once
    for rem in (1, 0):
        d = decision(client, "SL.TAKE", key, 10, 60, "BURST", 2)
        assert (d["allowed"], d["limit"], d["remaining"]) == (1, 2, rem)
    d = decision(client, "SL.TAKE", key, 10, 60, "BURST", 2)
    assert (d["allowed"], d["limit"], d["remaining"]) == (0, 2, 0)
    assert 5000 < d["retry_after_ms"] <= 6000


def test_take_cost(client, key):
    d = decision(client, "SL.TAKE", key, 10, 3600, "COST", 4)
    assert (d["allowed"], d["remaining"]) == (1, 6)
    d = decision(client, "SL.TAKE", key, 10, 3600, "COST", 7)
    assert (d["allowed"], d["remaining"]) == (0, 6), "a rejected take consumes nothing"
    assert d["retry_after_ms"] > 0
    d = decision(client, "SL.TAKE", key, 10, 3600, "COST", 11)
    assert (d["allowed"], d["retry_after_ms"]) == (0, -1), "a cost above the burst is never admitted"
    d = decision(client, "SL.TAKE", key, 10, 3600, "COST", 0)
    assert (d["allowed"], d["remaining"]) == (1, 6), "cost 0 peeks"
    d = decision(client, "SL.TAKE", key, 10, 3600, "COST", 6)
    assert (d["allowed"], d["remaining"]) == (1, 0)


def test_take_keywords_are_case_insensitive(client, key):
    d = decision(client, "sl.take", key, 10, 60, "burst", 2, "cost", 2, "algorithm", "token_bucket")
    assert (d["allowed"], d["limit"], d["remaining"]) == (1, 2, 0)


@pytest.mark.parametrize("algorithm", [a for a in ALGORITHMS if a != "leaky_bucket"])
def test_take_each_algorithm_admits_its_limit(client, key, algorithm):
    for i in range(3):
        d = decision(client, "SL.TAKE", key, 3, 3600, "ALGORITHM", algorithm)
        assert (d["allowed"], d["limit"], d["remaining"], d["retry_after_ms"]) == (1, 3, 2 - i, 0), (i, d)
        assert "delay_ms" not in d or d["delay_ms"] == 0
    d = decision(client, "SL.TAKE", key, 3, 3600, "ALGORITHM", algorithm)
    assert (d["allowed"], d["remaining"]) == (0, 0), d
    # a sliding window counter weighs the previous window: a full window may wait into
    # the next one (until the previous count's weight has shrunk), and its count is
    # forgotten only after two windows
    assert 0 < d["retry_after_ms"] <= (2 if algorithm == "sliding_window" else 1) * 3600000
    assert 0 < d["reset_after_ms"] <= (2 if algorithm == "sliding_window" else 1) * 3600000


def test_take_leaky_bucket_delays(client, key):
    # a queue: admitted callers are told to wait; a full queue rejects
    d = decision(client, "SL.TAKE", key, 3, 3600, "ALGORITHM", "leaky_bucket")
    assert d["allowed"] == 1 and d.get("delay_ms") == 0, d
    delays = [0]
    for _ in range(10):
        d = decision(client, "SL.TAKE", key, 3, 3600, "ALGORITHM", "leaky_bucket")
        assert "delay_ms" in d, "leaky_bucket decisions carry delay_ms: %r" % (d,)
        if not d["allowed"]:
            break
        delays.append(d["delay_ms"])
    else:
        pytest.fail("a leaky bucket of 3 admitted 11 callers at once")
    assert d["retry_after_ms"] > 0
    # one emission interval (1200 s) more to wait for each caller queued
    assert delays == sorted(delays) and len(set(delays)) == len(delays), delays
    assert 1200000 - 5000 < delays[1] <= 1200000, delays


def test_take_one_state_per_key(client, key):
    decision(client, "SL.TAKE", key, 1, 3600)
    assert decision(client, "SL.TAKE", key, 1, 3600)["allowed"] == 0
    client.send_command("SL.TAKE", key, 1, 3600, "ALGORITHM", "token_bucket")
    e = client.read_reply()
    assert isinstance(e, Error) and e.message.startswith("WRONGTYPE key holds a state of another"), e
    assert decision(client, "SL.TAKE", key, 1, 3600)["allowed"] == 0, "no fresh budget"


@pytest.mark.parametrize("period,ms", [("60", 60000), ("500ms", 500), ("30s", 30000), ("5m", 300000),
                                       ("2h", 7200000), ("1d", 86400000)])
def test_take_period_units(client, key, period, ms):
    d = decision(client, "SL.TAKE", key, 1, period)
    assert (d["allowed"], d["limit"], d["remaining"], d["reset_after_ms"]) == (1, 1, 0, ms)
    d = decision(client, "SL.TAKE", key, 1, period)
    assert d["allowed"] == 0 and 0 < d["retry_after_ms"] <= ms


def test_take_key_length(client, server):
    ok = "k" * 512
    assert decision(client, "SL.TAKE", ok, 10, 60)["allowed"] == 1
    assert err(client, "SL.TAKE", "k" * 513, 10, 60).startswith("ERR ")


def test_take_binary_key(client, key):
    k = key.encode() + b":\x00\r\n\xff"
    assert decision(client, "SL.TAKE", k, 1, 3600)["allowed"] == 1
    assert decision(client, "SL.TAKE", k, 1, 3600)["allowed"] == 0
    assert decision(client, "SL.TAKE", k[:-1] + b"\xfe", 1, 3600)["allowed"] == 1


@pytest.mark.parametrize("args,fragment", [
    (("0", "60"), "limit must be a positive integer"),
    (("-1", "60"), ""),
    (("x", "60"), "not an integer"),
    (("10", "x"), ""),
    (("10", "0"), ""),
    (("10", "-5"), ""),
    (("10", "5x"), ""),
    (("10", "60", "BURST"), ""),
    (("10", "60", "BURST", "x"), "not an integer"),
    (("10", "60", "BURST", "-1"), ""),
    (("10", "60", "COST", "-1"), ""),
    (("10", "60", "COST", "1.5"), ""),
    (("10", "60", "ALGORITHM", "nope"), ""),
    (("10", "60", "FOO", "1"), ""),
])
def test_take_errors(client, key, args, fragment):
    msg = err(client, "SL.TAKE", key, *args)
    assert msg.startswith("ERR "), msg
    assert fragment in msg, msg
    assert not msg.endswith("."), "Redis convention: no final period: %r" % msg
    # a failed command stores nothing
    assert decision(client, "SL.TAKE", key, 5, 60)["remaining"] == 4


@pytest.mark.parametrize("cmd,args", [
    ("sl.take", ("k", 10)), ("sl.peek", ("k", 10)), ("sl.policy", ("p",)), ("sl.takemany", ()),
    ("sl.reset", ()), ("sl.acquire", ("k", 2)), ("sl.release", ("k",)),
])
def test_wrong_arity(client, cmd, args):
    assert err(client, cmd.upper(), *args) == "ERR wrong number of arguments for '%s' command" % cmd


# ---------------------------------------------------------------- SL.PEEK

def test_peek_consumes_nothing_and_stores_nothing(client, key):
    for _ in range(3):
        d = decision(client, "SL.PEEK", key, 10, 3600)
        assert (d["allowed"], d["limit"], d["remaining"]) == (1, 10, 9), "what SL.TAKE would answer"
    assert client.call("SL.RESET", key) == 0, "a peek stores nothing"
    assert decision(client, "SL.TAKE", key, 10, 3600, "COST", 8)["remaining"] == 2
    d = decision(client, "SL.PEEK", key, 10, 3600, "COST", 3)
    assert (d["allowed"], d["remaining"]) == (0, 2) and d["retry_after_ms"] > 0
    d = decision(client, "SL.PEEK", key, 10, 3600, "COST", 2)
    assert (d["allowed"], d["remaining"]) == (1, 0)
    assert decision(client, "SL.TAKE", key, 10, 3600)["remaining"] == 1


# ---------------------------------------------------------------- SL.RESET

def test_reset(client, key):
    a, b, c = key + ":a", key + ":b", key + ":never"
    decision(client, "SL.TAKE", a, 1, 3600)
    decision(client, "SL.TAKE", b, 1, 3600)
    assert decision(client, "SL.TAKE", a, 1, 3600)["allowed"] == 0
    assert client.call("SL.RESET", a, b, c) == 2
    assert decision(client, "SL.TAKE", a, 1, 3600)["allowed"] == 1
    assert client.call("SL.RESET", c) == 0


def test_reset_cl_throttle_key(client, key):
    client.call("CL.THROTTLE", key, 0, 1, 3600)
    assert client.call("CL.THROTTLE", key, 0, 1, 3600)[0] == 1
    assert client.call("SL.RESET", key) == 1
    assert client.call("CL.THROTTLE", key, 0, 1, 3600) == [0, 1, 0, -1, 3600]


# ---------------------------------------------------------------- SL.TAKEMANY

def takemany(c, *args):
    reply = c.call("SL.TAKEMANY", *args)
    check_map_type(c, reply)
    m = as_map(reply)
    assert {"allowed", "rejected_by", "results"} <= set(m), m
    assert isinstance(m["results"], list)
    results = []
    for r in m["results"]:
        check_map_type(c, r)
        results.append(as_map(r))
    return m["allowed"], m["rejected_by"], results


def test_takemany_all_or_nothing(client, key):
    user, glob = key + ":user", key + ":global"
    args = (2, user, glob, "LIMIT", 10, 3600, "LIMIT", 2, 3600)
    for rem in (1, 0):
        allowed, by, res = takemany(client, *args)
        assert (allowed, by) == (1, -1)
        assert [(r["allowed"], r["limit"], r["remaining"]) for r in res] == [(1, 10, 10 - 2 + rem), (1, 2, rem)]
    allowed, by, res = takemany(client, *args)
    assert (allowed, by) == (0, 1)
    assert len(res) == 2
    assert (res[0]["allowed"], res[0]["remaining"]) == (1, 7), "what the user limit alone would answer now"
    assert (res[1]["allowed"], res[1]["remaining"]) == (0, 0) and res[1]["retry_after_ms"] > 0
    # nothing was taken from the user limit by the rejected request
    assert decision(client, "SL.TAKE", user, 10, 3600)["remaining"] == 7


def test_takemany_rejected_by_first_rejecting_index(client, key):
    a, b, c = key + ":a", key + ":b", key + ":c"
    decision(client, "SL.TAKE", b, 1, 3600)
    decision(client, "SL.TAKE", c, 1, 3600)
    allowed, by, res = takemany(client, 3, a, b, c, "LIMIT", 5, 3600, "LIMIT", 1, 3600, "LIMIT", 1, 3600)
    assert (allowed, by) == (0, 1)
    assert [r["allowed"] for r in res] == [1, 0, 0]
    assert decision(client, "SL.PEEK", a, 5, 3600)["remaining"] == 4, "a is untouched"


def test_takemany_group_options(client, key):
    a, b = key + ":a", key + ":b"
    allowed, by, res = takemany(client, 2, a, b, "LIMIT", 10, 60, "BURST", 3, "COST", 2,
                                "LIMIT", 5, 3600, "ALGORITHM", "fixed_window", "COST", 5)
    assert (allowed, by) == (1, -1)
    assert [(r["limit"], r["remaining"]) for r in res] == [(3, 1), (5, 0)]
    allowed, by, res = takemany(client, 2, a, b, "LIMIT", 10, 60, "BURST", 3, "COST", 1,
                                "LIMIT", 5, 3600, "ALGORITHM", "fixed_window", "COST", 1)
    assert (allowed, by) == (0, 1)
    assert decision(client, "SL.PEEK", a, 10, 60, "BURST", 3, "COST", 0)["remaining"] == 1


def test_takemany_one_key(client, key):
    allowed, by, res = takemany(client, 1, key, "LIMIT", 3, 3600)
    assert (allowed, by, res[0]["remaining"]) == (1, -1, 2)


def test_takemany_eight_keys_and_no_more(client, key):
    keys = ["%s:%d" % (key, i) for i in range(9)]
    limits = []
    for _ in range(8):
        limits += ["LIMIT", 4, 3600]
    allowed, by, res = takemany(client, 8, *keys[:8], *limits)
    assert (allowed, by, len(res)) == (1, -1, 8)
    assert err(client, "SL.TAKEMANY", 9, *keys, *limits, "LIMIT", 4, 3600).startswith("ERR ")


@pytest.mark.parametrize("args", [
    (2, "a", "b", "LIMIT", 10, 60),                      # fewer LIMIT groups than keys
    (1, "a", "LIMIT", 10, 60, "LIMIT", 10, 60),           # more
    (0, "LIMIT", 10, 60),
    (-1, "a", "LIMIT", 10, 60),
    ("x", "a", "LIMIT", 10, 60),
    (3, "a", "LIMIT", 10, 60),                            # numkeys larger than the arguments
    (1, "a", "LIMIT", 10),
    (1, "a", "LIMIT", 0, 60),
    (1, "a", "LIMIT", 10, 60, "FOO", 1),
    (1, "a", 10, 60),                                     # no LIMIT keyword
])
def test_takemany_errors(client, key, args):
    args = tuple(("%s:%s" % (key, a)) if a in ("a", "b") else a for a in args)
    assert err(client, "SL.TAKEMANY", *args).startswith("ERR ")
    assert client.call("SL.RESET", key + ":a", key + ":b") == 0, "a failed TAKEMANY stores nothing"


# ---------------------------------------------------------------- SL.ACQUIRE / SL.RELEASE

def test_acquire_release(client, key):
    a = client.call("SL.ACQUIRE", key, 2, 60000)
    b = client.call("SL.ACQUIRE", key, 2, 60000)
    assert isinstance(a, bytes) and isinstance(b, bytes), (a, b)
    assert a and b and a != b
    assert client.call("SL.ACQUIRE", key, 2, 60000) is None, "2 leases held: null"
    assert client.call("SL.RELEASE", key, a) == 1
    assert client.call("SL.RELEASE", key, a) == 0, "released twice"
    c = client.call("SL.ACQUIRE", key, 2, 60000)
    assert isinstance(c, bytes) and c not in (a, b)
    assert client.call("SL.ACQUIRE", key, 2, 60000) is None
    assert client.call("SL.RELEASE", key, b"no-such-lease") == 0
    assert client.call("SL.RELEASE", key + ":other", b) == 0, "a lease belongs to its key"
    assert client.call("SL.RELEASE", key, b) == 1
    assert client.call("SL.RELEASE", key, c) == 1


def test_acquire_null_type(client, key):
    """RESP3 null is `_`, RESP2 null bulk is `$-1`: look at the bytes."""
    assert client.call("SL.ACQUIRE", key, 1, 60000)
    client.send_command("SL.ACQUIRE", key, 1, 60000)
    line = client._line(time.monotonic() + 5)
    assert line == (b"_" if client.proto == 3 else b"$-1"), line


def test_acquire_weight(client, key):
    a = client.call("SL.ACQUIRE", key, 3, 60000, "WEIGHT", 2)
    assert isinstance(a, bytes)
    assert client.call("SL.ACQUIRE", key, 3, 60000, "WEIGHT", 2) is None, "2 + 2 > 3"
    b = client.call("SL.ACQUIRE", key, 3, 60000)
    assert isinstance(b, bytes)
    assert client.call("SL.ACQUIRE", key, 3, 60000) is None
    assert client.call("SL.RELEASE", key, a) == 1
    assert isinstance(client.call("SL.ACQUIRE", key, 3, 60000, "WEIGHT", 2), bytes)


def test_lease_expires_after_ttl(client, key):
    a = client.call("SL.ACQUIRE", key, 1, 300)
    assert isinstance(a, bytes)
    assert client.call("SL.ACQUIRE", key, 1, 300) is None
    t0 = time.monotonic()
    deadline = t0 + 10
    b = None
    while time.monotonic() < deadline:
        b = client.call("SL.ACQUIRE", key, 1, 60000)
        if b is not None:
            break
        time.sleep(0.05)
    assert b is not None, "the lease did not expire within 10 s of its 300 ms ttl"
    assert time.monotonic() - t0 >= 0.2, "the lease expired before its ttl"
    assert b != a, "the expired lease's id was issued again"
    assert client.call("SL.RELEASE", key, a) == 0, "an expired lease"
    assert client.call("SL.RELEASE", key, b) == 1


def test_lease_ids_are_unguessable(client, key):
    ids = []
    for i in range(20):
        k = "%s:%d" % (key, i)
        ids.append(client.call("SL.ACQUIRE", k, 1, 60000))
    assert len(set(ids)) == 20
    assert min(len(i) for i in ids) >= 16, "ids of at least 16 characters (64+ bits): %r" % ids[:3]


@pytest.mark.parametrize("args", [(0, 1000), ("x", 1000), (2, 0), (2, "x"), (2, -1), (2, 1000, "WEIGHT", 0),
                                  (2, 1000, "WEIGHT", "x"), (2, 1000, "FOO", 1)])
def test_acquire_errors(client, key, args):
    assert err(client, "SL.ACQUIRE", key, *args).startswith("ERR ")


# ---------------------------------------------------------------- SL.POLICY

def test_policy_unknown(client, key):
    assert err(client, "SL.POLICY", "nope", key) == "ERR unknown policy 'nope'"


# ---------------------------------------------------------------- redis-py (RESP2)

def test_redis_py_decisions(r, key):
    reply = r.execute_command("SL.TAKE", key, 100, 60)
    assert reply == [b"allowed", 1, b"limit", 100, b"remaining", 99, b"retry_after_ms", 0, b"reset_after_ms", 600]
    reply = r.execute_command("SL.TAKEMANY", 1, key, "LIMIT", 100, 60)
    assert reply[:4] == [b"allowed", 1, b"rejected_by", -1]
    assert reply[4] == b"results" and as_map(reply[5][0])["remaining"] == 98
    lease = r.execute_command("SL.ACQUIRE", key + ":l", 1, 60000)
    assert isinstance(lease, bytes)
    assert r.execute_command("SL.ACQUIRE", key + ":l", 1, 60000) is None
    assert r.execute_command("SL.RELEASE", key + ":l", lease) == 1
    assert r.execute_command("SL.RESET", key) == 1
    with pytest.raises(redis.ResponseError, match="wrong number of arguments for 'sl.take' command"):
        r.execute_command("SL.TAKE", key)


def _reclaimed(c):
    info = c.call("INFO").decode()
    return sum(int(line.split(":", 1)[1]) for line in info.splitlines()
               if line.startswith("reclaim") and ":" in line and line.split(":", 1)[1].strip().isdigit())


def test_expired_lease_id_never_comes_back(server, key):
    """A holder whose lease expired must not be able to release the next holder's lease:
    once the expired state is reclaimed (the server's sweep), a new lease on the same key
    must not get the old id again."""
    keys = ["%s:%d" % (key, i) for i in range(5)]
    with server.conn() as c:
        before = _reclaimed(c)
        old = {k: c.call("SL.ACQUIRE", k, 1, 200) for k in keys}
        # wait until the sweep has reclaimed the expired leases' keys (INFO's reclaim
        # counter), or 3 s when the server does not count them
        deadline = time.monotonic() + 10
        has_counter = "reclaim" in c.call("INFO").decode()
        while True:
            if has_counter and _reclaimed(c) >= before + len(keys):
                break
            if not has_counter and time.monotonic() > deadline - 7:
                break
            assert time.monotonic() < deadline, "the expired leases' keys were not reclaimed within 10 s"
            time.sleep(0.05)
        for k in keys:
            new = c.call("SL.ACQUIRE", k, 1, 60000)
            assert isinstance(new, bytes)
            assert new != old[k], "an expired lease's id was issued again: %r" % new
            assert c.call("SL.RELEASE", k, old[k]) == 0, "the expired holder released the new lease"
            assert c.call("SL.RELEASE", k, new) == 1


@pytest.mark.parametrize("args", [
    ("SL.ACQUIRE", "{k}", 1000000000, 60000),
    ("SL.ACQUIRE", "{k}", 2, 9223372036854775807),
    ("SL.TAKE", "{k}", 1000000000, 60, "ALGORITHM", "sliding_log"),
    ("SL.TAKE", "{k}", 9223372036854775807, 1),
    ("SL.TAKE", "{k}", 1, 9223372036854775807),
    ("SL.TAKE", "{k}", 1, "999999999999d"),
    ("SL.TAKE", "{k}", 10, 60, "BURST", 9223372036854775807),
    ("SL.TAKE", "{k}", 10, 60, "COST", 9223372036854775807),
    ("SL.TAKE", "{k}", 10, "1ms", "ALGORITHM", "leaky_bucket", "BURST", 9223372036854775807),
    ("CL.THROTTLE", "{k}", 9223372036854775806, 1, 1),
    ("CL.THROTTLE", "{k}", 1, 1, 9223372036854775807),
])
def test_absurd_numbers(client, server, key, args):
    """A clear error or a sane decision; never a crash, a hang, or a huge allocation."""
    args = tuple(key if a == "{k}" else a for a in args)
    client.send_command(*args)
    reply = client.read_reply()
    if isinstance(reply, Error):
        assert reply.message.startswith("ERR "), reply
    elif args[0] == "SL.TAKE":
        d = as_map(reply)
        assert d["allowed"] in (0, 1) and d["remaining"] >= 0
    assert client.call("PING") == "PONG"
    with open("/proc/%d/status" % server.proc.pid) as f:
        rss_kb = int([l for l in f if l.startswith("VmRSS:")][0].split()[1])
    assert rss_kb < 1024 * 1024, "sluiced holds %d MB after %r" % (rss_kb // 1024, args)


def test_takemany_same_key_twice(client, key):
    # one state under both limits (same algorithm): each limit takes its cost from it
    allowed, by, res = takemany(client, 2, key, key, "LIMIT", 10, 3600, "LIMIT", 10, 3600)
    assert (allowed, by) == (1, -1)
    assert decision(client, "SL.PEEK", key, 10, 3600, "COST", 0)["remaining"] in (8, 9)
