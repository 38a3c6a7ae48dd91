"""One table of command cases that sluiced and sluice-redis.so must both answer
(docs/commands.md): tests/integration/test_shared_cases.py runs it against sluiced,
tests/module/test_cases.py against the module in Redis, and tests/module/test_lua.py
runs the cases the Lua scripts cover through EVALSHA.

A case is (name, steps); a step is (argv, want). In argv, K is replaced by a key no
other case uses (written with a hash tag, so that a case's keys share one Redis Cluster
slot) and LEASE by the lease id the last SL.ACQUIRE answered. `want` is:
  an int, None or a str         the exact reply (bulk strings compared decoded)
  a list                        an array, element by element
  a dict                        a map (RESP3) or a flat array of pairs (RESP2), by field
  Range(lo, hi)                 an int in [lo, hi]: values that move with the clock
  Err("prefix")                 an error reply starting with prefix
  IsLease                       a lease id: 24 hex digits
Every case runs well within a second, so a value that depends on elapsed time gets a
range of a few seconds; nothing here asserts timing.
"""

import re


class Range:
    def __init__(self, lo, hi):
        self.lo, self.hi = lo, hi

    def __repr__(self):
        return "Range(%d, %d)" % (self.lo, self.hi)


class Err:
    def __init__(self, prefix):
        self.prefix = prefix

    def __repr__(self):
        return "Err(%r)" % self.prefix


class _Lease:
    def __repr__(self):
        return "IsLease"


IsLease = _Lease()
K = "\0K"       # placeholders in argv
K2 = "\0K2"
LEASE = "\0LEASE"
SLACK = 5000    # ms a case may take, for values that move with the clock


def D(allowed, limit, remaining, retry, reset, **more):
    d = {"allowed": allowed, "limit": limit, "remaining": remaining,
         "retry_after_ms": retry, "reset_after_ms": reset}
    d.update(more)
    return d


def near(ms):
    """A duration of `ms` at the first step, a little less later on."""
    return Range(max(ms - SLACK, 0), ms)


CASES = [
    ("cell_readme", [
        (["CL.THROTTLE", K, 15, 30, 60, 1], [0, 16, 15, -1, 2]),
        (["CL.THROTTLE", K, 15, 30, 60], [0, 16, 14, -1, 4]),
    ]),
    ("cell_reference_at_zero", [
        (["CL.THROTTLE", K, 4, 1, 1, 6], [1, 5, 5, -1, 0]),
        (["CL.THROTTLE", K, 4, 1, 1, 1], [0, 5, 4, -1, 1]),
        (["CL.THROTTLE", K, 4, 1, 1, 1], [0, 5, 3, -1, 2]),
        (["CL.THROTTLE", K, 4, 1, 1, 1], [0, 5, 2, -1, 3]),
        (["CL.THROTTLE", K, 4, 1, 1, 1], [0, 5, 1, -1, 4]),
        (["CL.THROTTLE", K, 4, 1, 1, 1], [0, 5, 0, -1, 5]),
        (["CL.THROTTLE", K, 4, 1, 1, 1], [1, 5, 0, 1, 5]),
    ]),
    ("cell_drain_and_peek", [
        (["CL.THROTTLE", K, 1, 1, 60], [0, 2, 1, -1, 60]),
        (["CL.THROTTLE", K, 1, 1, 60], [0, 2, 0, -1, 120]),
        (["CL.THROTTLE", K, 1, 1, 60], [1, 2, 0, 60, 120]),
        (["CL.THROTTLE", K, 1, 1, 60, 0], [0, 2, 0, -1, 120]),
    ]),
    ("cell_quantity", [
        (["CL.THROTTLE", K, 9, 10, 10, 4], [0, 10, 6, -1, 4]),
    ]),
    ("take_doc_example", [
        (["SL.TAKE", K, 100, 60], D(1, 100, 99, 0, 600)),
    ]),
    ("take_drains_then_rejects", [
        (["SL.TAKE", K, 3, 3600], D(1, 3, 2, 0, near(1200000))),
        (["SL.TAKE", K, 3, 3600], D(1, 3, 1, 0, near(2400000))),
        (["SL.TAKE", K, 3, 3600], D(1, 3, 0, 0, near(3600000))),
        (["SL.TAKE", K, 3, 3600], D(0, 3, 0, near(1200000), near(3600000))),
    ]),
    ("take_burst", [
        (["SL.TAKE", K, 10, 60, "BURST", 2], D(1, 2, 1, 0, near(6000))),
        (["SL.TAKE", K, 10, 60, "BURST", 2], D(1, 2, 0, 0, near(12000))),
        (["SL.TAKE", K, 10, 60, "BURST", 2], D(0, 2, 0, near(6000), near(12000))),
    ]),
    ("take_cost", [
        (["SL.TAKE", K, 10, 3600, "COST", 4], D(1, 10, 6, 0, near(1440000))),
        (["SL.TAKE", K, 10, 3600, "COST", 7], D(0, 10, 6, near(360000), near(1440000))),
        (["SL.TAKE", K, 10, 3600, "COST", 11], D(0, 10, 6, -1, near(1440000))),
        (["SL.TAKE", K, 10, 3600, "COST", 0], D(1, 10, 6, 0, near(1440000))),
        (["SL.TAKE", K, 10, 3600, "COST", 6], D(1, 10, 0, 0, near(3600000))),
    ]),
    ("take_burst_one_is_one_at_a_time", [
        (["SL.TAKE", K, 10, 60, "BURST", 1], D(1, 1, 0, 0, near(6000))),
        (["SL.TAKE", K, 10, 60, "BURST", 1], D(0, 1, 0, near(6000), near(6000))),
    ]),
    ("take_algorithm_names_any_case", [
        (["SL.TAKE", K, 10, 60, "ALGORITHM", "GCRA"], D(1, 10, 9, 0, 6000)),
        (["SL.TAKE", K, 10, 60, "ALGORITHM", "gcra"], D(1, 10, 8, 0, near(12000))),
        (["SL.TAKE", K2, 10, 60, "ALGORITHM", "Token_Bucket"], D(1, 10, 9, 0, 6000)),
    ]),
    ("take_keywords_any_case", [
        (["sl.take", K, 10, 60, "burst", 2, "cost", 2, "algorithm", "token_bucket"],
         D(1, 2, 0, 0, near(12000))),
    ]),
    ("take_one_state_per_key", [
        (["SL.TAKE", K, 1, 3600], D(1, 1, 0, 0, near(3600000))),
        (["SL.TAKE", K, 1, 3600], D(0, 1, 0, near(3600000), near(3600000))),
        (["SL.TAKE", K, 1, 3600, "ALGORITHM", "token_bucket"], Err("WRONGTYPE key holds a state")),
        (["SL.PEEK", K, 1, 3600, "ALGORITHM", "sliding_window"], Err("WRONGTYPE key holds a state")),
        (["SL.TAKE", K, 1, 3600], D(0, 1, 0, near(3600000), near(3600000))),
        (["SL.RESET", K], 1),
        (["SL.TAKE", K, 1, 3600, "ALGORITHM", "token_bucket"], D(1, 1, 0, 0, near(3600000))),
    ]),
    ("take_period_units", [
        (["SL.TAKE", K, 1, "500ms"], D(1, 1, 0, 0, 500)),
        (["SL.TAKE", K2, 1, "2h"], D(1, 1, 0, 0, 7200000)),
    ]),
    ("leaky_bucket_delays", [
        (["SL.TAKE", K, 3, 3600, "ALGORITHM", "leaky_bucket"],
         D(1, 3, 2, 0, near(1200000), delay_ms=0)),
        (["SL.TAKE", K, 3, 3600, "ALGORITHM", "leaky_bucket"],
         D(1, 3, 1, 0, near(2400000), delay_ms=near(1200000))),
    ]),
    ("peek_consumes_nothing", [
        (["SL.PEEK", K, 5, 60], D(1, 5, 4, 0, near(12000))),
        (["SL.TAKE", K, 5, 60, "COST", 2], D(1, 5, 3, 0, near(24000))),
        (["SL.PEEK", K, 5, 60, "COST", 4], D(0, 5, 3, near(12000), near(24000))),
        (["SL.TAKE", K, 5, 60, "COST", 3], D(1, 5, 0, 0, near(60000))),
    ]),
    ("takemany_all_or_nothing", [
        (["SL.TAKEMANY", 2, K, K2, "LIMIT", 1, 60, "LIMIT", 5, 60],
         {"allowed": 1, "rejected_by": -1,
          "results": [D(1, 1, 0, 0, 60000), D(1, 5, 4, 0, 12000)]}),
        (["SL.TAKEMANY", 2, K, K2, "LIMIT", 1, 60, "LIMIT", 5, 60],
         {"allowed": 0, "rejected_by": 0,
          "results": [D(0, 1, 0, near(60000), near(60000)), D(1, 5, 3, 0, near(24000))]}),
        (["SL.TAKE", K2, 5, 60], D(1, 5, 3, 0, near(24000))),
    ]),
    ("takemany_repeated_key_adds_up", [
        (["SL.TAKEMANY", 2, K, K, "LIMIT", 3, 60, "LIMIT", 3, 60, "COST", 2],
         {"allowed": 1, "rejected_by": -1,
          "results": [D(1, 3, 2, 0, near(20000)), D(1, 3, 0, 0, near(60000))]}),
        (["SL.TAKEMANY", 2, K, K, "LIMIT", 3, 60, "LIMIT", 3, 60],
         {"allowed": 0, "rejected_by": 0,
          "results": [D(0, 3, 0, near(20000), near(60000)), D(0, 3, 0, near(20000), near(60000))]}),
    ]),
    ("takemany_repeated_key_adds_up_when_rejected", [
        # the second take of K does not fit after the first: the answers say
        # so (each alone would fit), and nothing is consumed
        (["SL.TAKEMANY", 3, K, K, K2, "LIMIT", 3, 60, "COST", 2, "LIMIT", 3, 60, "COST", 2,
          "LIMIT", 3, 60],
         {"allowed": 0, "rejected_by": 1,
          "results": [D(1, 3, 1, 0, near(40000)), D(0, 3, 1, near(20000), near(40000)),
                      D(1, 3, 2, 0, near(20000))]}),
        (["SL.PEEK", K, 3, 60, "COST", 0], D(1, 3, 3, 0, 0)),
        (["SL.PEEK", K2, 3, 60, "COST", 0], D(1, 3, 3, 0, 0)),
    ]),
    ("reset_forgets", [
        (["SL.TAKE", K, 1, 3600], D(1, 1, 0, 0, near(3600000))),
        (["SL.RESET", K, K2], 1),
        (["SL.RESET", K], 0),
        (["SL.TAKE", K, 1, 3600], D(1, 1, 0, 0, near(3600000))),
    ]),
    ("leases", [
        (["SL.ACQUIRE", K, 1, 10000], IsLease),
        (["SL.ACQUIRE", K, 1, 10000], None),
        (["SL.RELEASE", K, LEASE], 1),
        (["SL.RELEASE", K, LEASE], 0),
        (["SL.RELEASE", K, "000000000000000100000001"], 0),
        (["SL.RELEASE", K, "not-a-lease"], 0),
        (["SL.ACQUIRE", K, 2, 10000, "WEIGHT", 2], IsLease),
    ]),
    ("bad_arguments", [
        (["SL.TAKE", K, 10], Err("ERR wrong number of arguments for 'sl.take' command")),
        (["CL.THROTTLE", K, 1, 2], Err("ERR wrong number of arguments for 'cl.throttle' command")),
        (["CL.THROTTLE", K, 1, 2, 3, 4, 5], Err("ERR wrong number of arguments for 'cl.throttle' command")),
        (["SL.TAKE", K, "x", 60], Err("ERR value is not an integer or out of range")),
        (["SL.TAKE", K, 10, 60, "ALGORITHM", "nope"], Err("ERR unknown algorithm 'nope'")),
        (["SL.TAKE", K, 10, 60, "COST", -1], Err("ERR cost must be a non-negative integer")),
        (["SL.TAKE", K, 10, "1y"], Err("ERR period is not a duration")),
        (["SL.TAKE", K, 0, 60], Err("ERR limit must be a positive integer")),
        (["SL.TAKE", K, 10, 60, "BOGUS", 1], Err("ERR syntax error: unknown option 'BOGUS'")),
        (["SL.TAKE", K, 10, 60, "BURST"], Err("ERR syntax error: option 'BURST' needs a value")),
        (["SL.TAKEMANY", 0, K, "LIMIT", 1, 60], Err("ERR numkeys must be between 1 and 8")),
        (["SL.TAKEMANY", 2, K, K2, "LIMIT", 1, 60], Err("ERR syntax error: expected LIMIT for key 2 of 2")),
        (["CL.THROTTLE", K, 1, 0, 60], Err("Cell error: Zero rates are not supported")),
        (["CL.THROTTLE", K, 1, 5, 0], Err("Cell error: Zero rates are not supported")),
        (["CL.THROTTLE", K, -1, 5, 60],
         Err("ERR max_burst must be an integer between 0 and 2305843009213693950")),
        (["CL.THROTTLE", K, 1, 2000000, 1], Err("ERR rate is too high")),
        (["CL.THROTTLE", K, 1, 1, 60, -1], Err("ERR cost must be a non-negative integer")),
        (["SL.ACQUIRE", K, 0, 1000], Err("ERR max_in_flight must be between 1 and 65536")),
        (["SL.ACQUIRE", K, 1, 0], Err("ERR ttl_ms must be a positive number of milliseconds")),
        (["SL.POLICY", "nosuch", K], Err("ERR unknown policy 'nosuch'")),
        (["SL.TAKE", "", 1, 60], Err("ERR key is empty or too long")),
        # a given burst is at least 1 (0 used to mean "the limit"), in every algorithm
        (["SL.TAKE", K, 10, 60, "BURST", 0],
         Err("ERR burst must be a positive integer of at most 2305843009213693951 "
             "(omit it for a burst of the limit)")),
        (["SL.TAKE", K, 10, 60, "ALGORITHM", "fixed_window", "BURST", 0],
         Err("ERR burst must be a positive integer")),
        (["SL.TAKEMANY", 1, K, "LIMIT", 10, 60, "BURST", 0], Err("ERR burst must be a positive integer")),
        (["SL.TAKE", K, 10, 60, "BURST", 3, "BURST", 4],
         Err("ERR syntax error: option 'BURST' is given twice")),
        (["SL.PEEK", K, 10, 60, "COST", 1, "cost", 2], Err("ERR syntax error: option 'COST' is given twice")),
        (["SL.TAKE", K, 10, 60, "ALGORITHM", "gcra", "ALGORITHM", "gcra"],
         Err("ERR syntax error: option 'ALGORITHM' is given twice")),
        (["SL.ACQUIRE", K, 2, 1000, "WEIGHT", 3], Err("ERR weight 3 exceeds max_in_flight 2")),
        # nothing above stored anything: the key is still "never seen"
        (["SL.PEEK", K, 10, 60], D(1, 10, 9, 0, 6000)),
        (["SL.PEEK", K2, 10, 60], D(1, 10, 9, 0, 6000)),
    ]),
]

for _algo in ("gcra", "token_bucket", "fixed_window", "sliding_log", "sliding_window"):
    CASES.append(("algorithm_%s_admits_its_limit" % _algo, [
        (["SL.TAKE", K, 3, 3600, "ALGORITHM", _algo], D(1, 3, 2, 0, Range(1, 7200000))),
        (["SL.TAKE", K, 3, 3600, "ALGORITHM", _algo], D(1, 3, 1, 0, Range(1, 7200000))),
        (["SL.TAKE", K, 3, 3600, "ALGORITHM", _algo], D(1, 3, 0, 0, Range(1, 7200000))),
        # a full sliding window counter may wait into the next window, until the
        # previous count's weight has shrunk enough: up to 2 periods
        (["SL.TAKE", K, 3, 3600, "ALGORITHM", _algo],
         D(0, 3, 0, Range(1, 7200000 if _algo == "sliding_window" else 3600000),
           Range(1, 7200000))),
    ]))


def keys_for(case_name, unique):
    """The two keys of a case: one hash tag, so both live in one cluster slot."""
    tag = "{%s:%s}" % (case_name, unique)
    return tag + ":a", tag + ":b"


def substitute(argv, k1, k2, lease):
    out = []
    for a in argv:
        if a == K:
            out.append(k1)
        elif a == K2:
            out.append(k2)
        elif a == LEASE:
            out.append(lease or "")
        else:
            out.append(str(a))
    return out


def _text(v):
    return v.decode() if isinstance(v, bytes) else v


def as_map(reply):
    if isinstance(reply, dict):
        items = list(reply.items())
    else:
        assert isinstance(reply, list) and len(reply) % 2 == 0, "not a map: %r" % (reply,)
        items = list(zip(reply[0::2], reply[1::2]))
    return {str(_text(k)): v for k, v in items}


def check(got, want, is_error, where):
    """Asserts that a reply matches `want`. is_error(got) -> the error text or None."""
    err = is_error(got)
    if isinstance(want, Err):
        assert err is not None and err.startswith(want.prefix), \
            "%s: want an error starting %r, got %r" % (where, want.prefix, got)
        return
    assert err is None, "%s: unexpected error %r (want %r)" % (where, err, want)
    if want is IsLease:
        assert re.fullmatch(r"[0-9a-f]{24}", _text(got) or ""), "%s: not a lease id: %r" % (where, got)
    elif isinstance(want, Range):
        assert isinstance(got, int) and want.lo <= got <= want.hi, "%s: %r not in %r" % (where, got, want)
    elif isinstance(want, dict):
        m = as_map(got)
        assert set(m) == set(want), "%s: fields %s, want %s" % (where, sorted(m), sorted(want))
        for k in want:
            check(m[k], want[k], is_error, "%s.%s" % (where, k))
    elif isinstance(want, list):
        assert isinstance(got, list) and len(got) == len(want), "%s: %r, want %r" % (where, got, want)
        for i, (g, w) in enumerate(zip(got, want)):
            check(g, w, is_error, "%s[%d]" % (where, i))
    else:
        assert _text(got) == want and type(_text(got)) is type(want), \
            "%s: %r, want %r" % (where, got, want)


def run_case(call, is_error, name, steps, unique):
    """Runs one case through call(*argv) -> reply."""
    k1, k2 = keys_for(name, unique)
    lease = None
    for i, (argv, want) in enumerate(steps):
        args = substitute(argv, k1, k2, lease)
        got = call(*args)
        check(got, want, is_error, "%s step %d %s" % (name, i, " ".join(args)))
        if want is IsLease:
            lease = _text(got)
