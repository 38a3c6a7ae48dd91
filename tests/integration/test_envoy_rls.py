"""Envoy's ShouldRateLimit on a real sluiced (--grpc-port, --envoy-config DIR), from a real
gRPC client (grpcio, with test_grpc.py's message classes built from proto/).

What is checked, against the semantics of src/cmd/rls.h and envoyproxy/ratelimit's:
counting down to OVER_LIMIT, current_limit and duration_until_reset (fixed windows on the
wall clock); statuses in request order and overall_code; hits_addend of the request and
of a descriptor; a descriptor's limit override; unlimited, no rule, replaces, wildcards,
nested descriptors, shadow_mode, requests_per_unit 0, an unknown domain, empty requests;
the extensions (algorithm and burst, rate_limits taken all or nothing); the example
configurations of envoyproxy/ratelimit's README with the answers it documents, and its
test/config wildcard.yaml and share_threshold.yaml; reloads (a change in DIR, an invalid
file kept out, SIGHUP, calls in flight) that keep each key's state, the units used
carried across a change of limit or algorithm; and a subset of the same on a central
redis-server (--store redis://, the module and the Lua script), with many concurrent
calls on one channel counted exactly.

Counting tests use hour or day windows, and each test its own descriptor values, so that
neither a window's end nor another test's calls move the counts they assert.
"""

import os
import signal
import sys
import time
import uuid

import grpc
import pytest

from conftest import Sluiced, free_port, write
from test_grpc import M, code_of, rls

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from redis_server import RedisServer  # noqa: E402

OK, OVER = 1, 2
SECOND, MINUTE, HOUR, DAY = 1, 2, 3, 4
MAX_U32 = 4294967295

BASIC = """\
domain: basic
descriptors:
  - key: user
    rate_limit: {name: per_user, unit: hour, requests_per_unit: 3}
  - key: minute
    rate_limit: {unit: minute, requests_per_unit: 5}
  - key: free
    rate_limit: {unlimited: true}
  - key: open
  - key: blocked
    rate_limit: {unit: hour, requests_per_unit: 0}
  - key: shadow
    shadow_mode: true
    rate_limit: {unit: hour, requests_per_unit: 2}
  - key: path
    value: /api/*
    rate_limit: {unit: hour, requests_per_unit: 2}
  - key: path
    value: /img/*.png
    rate_limit: {unit: hour, requests_per_unit: 1}
  - key: path
    rate_limit: {unit: hour, requests_per_unit: 10}
  - key: tenant
    descriptors:
      - key: user
        rate_limit: {unit: hour, requests_per_unit: 2}
        descriptors:
          - key: op
            rate_limit: {unit: hour, requests_per_unit: 4}
  - key: k1
    descriptors:
      - key: u
        rate_limit: {name: specific, unit: hour, requests_per_unit: 5}
  - key: k2
    descriptors:
      - key: u
        rate_limit:
          replaces: [{name: specific}]
          unit: hour
          requests_per_unit: 10
"""

EXT = """\
domain: ext
descriptors:
  - key: tb
    rate_limit: {unit: hour, requests_per_unit: 60, algorithm: token_bucket, burst: 5}
  - key: gcra
    rate_limit: {unit: hour, requests_per_unit: 60, algorithm: gcra, burst: 3}
  - key: multi
    rate_limit: {name: both, unit: hour, requests_per_unit: 5}
    rate_limits:
      - {unit: day, requests_per_unit: 3}
"""

# envoyproxy/ratelimit's README, "Examples": the configurations as it gives them (Example 4's
# second variant under a domain of its own, since one server holds one file per domain, and
# Example 9's three snippets of one domain in one file).
README_EXAMPLES = {
    "example1.yaml": """\
domain: mongo_cps
descriptors:
  - key: database
    value: users
    rate_limit:
      unit: second
      requests_per_unit: 500

  - key: database
    value: default
    rate_limit:
      unit: second
      requests_per_unit: 500
""",
    "example2.yaml": """\
domain: messaging
descriptors:
  # Only allow 5 marketing messages a day
  - key: message_type
    value: marketing
    descriptors:
      - key: to_number
        rate_limit:
          unit: day
          requests_per_unit: 5

  # Only allow 100 messages a day to any unique phone number
  - key: to_number
    rate_limit:
      unit: day
      requests_per_unit: 100
""",
    "example3.yaml": """\
domain: edge_proxy_per_ip
descriptors:
  - key: remote_address
    rate_limit:
      unit: second
      requests_per_unit: 10

  # Black list IP
  - key: remote_address
    value: 50.0.0.5
    rate_limit:
      unit: second
      requests_per_unit: 0
""",
    "example4.yaml": """\
domain: example4
descriptors:
  - key: key
    value: value
    rate_limit:
      requests_per_unit: 300
      unit: second
""",
    "example4b.yaml": """\
domain: example4b
descriptors:
  - key: key
    value: value
    descriptors:
      - key: subkey
        rate_limit:
          requests_per_unit: 300
          unit: second
""",
    "example5.yaml": """\
domain: internal
descriptors:
  - key: ldap
    rate_limit:
      unlimited: true

  - key: azure
    rate_limit:
      unit: minute
      requests_per_unit: 100
""",
    "example6.yaml": """\
domain: example6
descriptors:
  - key: service
    descriptors:
      - key: user
        value: user-a
        rate_limit:
          requests_per_unit: 10
          unit: second
        shadow_mode: true
      - key: user
        value: user-b
        rate_limit:
          requests_per_unit: 20
          unit: second
""",
    "example7.yaml": """\
domain: example7
descriptors:
  - key: key_1
    value: value_1
    descriptors:
      - key: user
        value: bkthomps
        rate_limit:
          name: specific_limit
          requests_per_unit: 5
          unit: second
  - key: key_2
    value: value_2
    descriptors:
      - key: user
        value: bkthomps
        rate_limit:
          replaces:
            - name: specific_limit
          requests_per_unit: 10
          unit: second
""",
    "example8.yaml": """\
domain: example8
descriptors:
  - key: key1
    detailed_metric: true
    rate_limit:
      unit: minute
      requests_per_unit: 10
  - key: key1
    value: value1
    rate_limit:
      unit: minute
      requests_per_unit: 20
""",
    "example9.yaml": """\
domain: example9
descriptors:
  - key: key1
    value: value*
    rate_limit:
      unit: minute
      requests_per_unit: 20
  - key: path
    value: /api/*/action
    rate_limit:
      unit: minute
      requests_per_unit: 20
  - key: route
    value: /api/*/resource/*/action
    rate_limit:
      unit: minute
      requests_per_unit: 20
""",
    "example10.yaml": """\
domain: example10
descriptors:
  - key: route
    value_to_metric: true
    descriptors:
      - key: http_method
        value_to_metric: true
        descriptors:
          - key: subject_id
            rate_limit:
              unit: minute
              requests_per_unit: 60
""",
    "example11.yaml": """\
domain: example11
descriptors:
  # With share_threshold: true, all files/* matches share the same threshold
  - key: files
    value: files/*
    share_threshold: true
    rate_limit:
      unit: hour
      requests_per_unit: 10

  # Without share_threshold, each files_no_share/* match has its own isolated threshold
  - key: files_no_share
    value: files_no_share/*
    share_threshold: false
    rate_limit:
      unit: hour
      requests_per_unit: 10
""",
}


# envoyproxy/ratelimit's test/config/wildcard.yaml and share_threshold.yaml (each its own
# domain here: both say test-domain).
REF_WILDCARD = """\
# Basic configuration for testing.
domain: test-wildcard
descriptors:
  - key: wild
    value: foo*
    rate_limit:
      unit: minute
      requests_per_unit: 20
  - key: noWild
    value: foo
    rate_limit:
      unit: minute
      requests_per_unit: 20
  - key: noVal
    rate_limit:
      unit: minute
      requests_per_unit: 20
  - key: midWild
    value: bar*b
    rate_limit:
      unit: minute
      requests_per_unit: 20
  - key: multiWild
    value: foo*bar*baz
    rate_limit:
      unit: minute
      requests_per_unit: 10
  - key: nestedWild
    value: val1
    descriptors:
      - key: wild
        value: goo*
        rate_limit:
          unit: minute
          requests_per_unit: 20
"""

REF_SHARE_THRESHOLD = """\
# Configuration for testing share_threshold feature
domain: test-share
descriptors:
  - key: files
    value: files/*
    share_threshold: true
    rate_limit:
      unit: minute
      requests_per_unit: 100
  - key: nested
    value: parent
    descriptors:
      - key: files
        value: nested/*
        share_threshold: true
        rate_limit:
          unit: minute
          requests_per_unit: 200
  # Test case for nested descriptors with same key name at different levels
  - key: files
    value: top/*
    share_threshold: true
    descriptors:
      - key: files
        value: nested/*
        share_threshold: true
        rate_limit:
          unit: minute
          requests_per_unit: 300
  # Test case for nested descriptors with multiple wildcards - mixed share_threshold
  - key: path
    value: path/*
    share_threshold: true
    descriptors:
      - key: file
        value: file/*
        share_threshold: false
        descriptors:
          - key: type
            rate_limit:
              unit: minute
              requests_per_unit: 120
  # Test case: explicit value takes precedence over wildcard with share_threshold
  - key: file
    value: test1
    rate_limit:
      unit: minute
      requests_per_unit: 50
  - key: file
    value: test*
    share_threshold: true
    rate_limit:
      unit: minute
      requests_per_unit: 100
  # Test case: share_threshold with middle wildcard nested
  - key: tenant
    value: t*prod
    share_threshold: true
    descriptors:
      - key: resource
        value: res*v2
        share_threshold: true
        rate_limit:
          unit: minute
          requests_per_unit: 60
"""

def uniq():
    return uuid.uuid4().hex[:10]


def start_rls(tmp_path, files, args=(), workdir=None):
    """A sluiced serving ShouldRateLimit from a directory holding `files` (name: text)."""
    d = tmp_path / ("envoy-" + uniq())
    d.mkdir()
    for name, text in files.items():
        write(d / name, text)
    port = free_port()
    s = Sluiced(args=["--grpc-port", str(port), "--envoy-config", str(d)] + list(args),
                workdir=workdir)
    s.grpc_port = port
    s.envoy_dir = d
    s.start()
    return s


def open_channel(s):
    ch = grpc.insecure_channel("127.0.0.1:%d" % s.grpc_port)
    grpc.channel_ready_future(ch).result(timeout=20)
    return ch


@pytest.fixture(scope="module")
def envoy_server(tmp_path_factory):
    files = {"basic.yaml": BASIC, "ext.yaml": EXT, "ref_wildcard.yaml": REF_WILDCARD,
             "ref_share.yaml": REF_SHARE_THRESHOLD}
    files.update(README_EXAMPLES)
    s = start_rls(tmp_path_factory.mktemp("rls"), files)
    yield s
    s.stop()


@pytest.fixture(scope="module")
def ch(envoy_server):
    c = open_channel(envoy_server)
    yield c
    c.close()


def req(domain, *descriptors, hits=None):
    """A request: each descriptor a (key, value) pair, a list of pairs, or a dict
    {"entries": [...], "limit": (rpu, unit), "hits": n}."""
    r = M["req"](domain=domain)
    if hits is not None:
        r.hits_addend = hits
    for d in descriptors:
        if not isinstance(d, dict):
            d = {"entries": d}
        entries = d["entries"]
        if isinstance(entries, tuple):
            entries = [entries]
        msg = r.descriptors.add()
        for k, v in entries:
            e = msg.entries.add()
            e.key, e.value = k, v
        if "limit" in d:
            msg.limit.requests_per_unit, msg.limit.unit = d["limit"]
        if "hits" in d:
            msg.hits_addend.value = d["hits"]
    return r


def call(ch, r):
    return rls(ch)(r, timeout=20)


def one(ch, domain, entries, **kw):
    """The status of a request of one descriptor."""
    resp = call(ch, req(domain, entries, **kw))
    assert len(resp.statuses) == 1
    return resp.statuses[0]


def codes(ch, domain, entries, n, **kw):
    return [one(ch, domain, entries, **kw).code for _ in range(n)]


def reset_s(st):
    return st.duration_until_reset.seconds + st.duration_until_reset.nanos / 1e9


# ---------------------------------------------------------------- counting


def test_allowed_until_the_limit_then_over_limit(ch):
    u = ("user", uniq())
    seen = [one(ch, "basic", u) for _ in range(5)]
    assert [s.code for s in seen] == [OK, OK, OK, OVER, OVER]
    assert [s.limit_remaining for s in seen] == [2, 1, 0, 0, 0]
    for s in seen:
        assert s.HasField("current_limit")
        assert s.current_limit.requests_per_unit == 3
        assert s.current_limit.unit == HOUR
        assert s.current_limit.name == "per_user"
        assert 0 < reset_s(s) <= 3600
    # another value of the key has a budget of its own
    assert one(ch, "basic", ("user", uniq())).limit_remaining == 2


def test_a_fixed_window_ends_on_the_wall_clock(ch):
    # A minute's window ends at a whole minute: now + duration_until_reset is one, for
    # some `now` within the call (a second of slack either side for the clocks' reading).
    t0 = time.time()
    st = one(ch, "basic", ("minute", uniq()))
    t1 = time.time()
    assert st.code == OK and st.limit_remaining == 4
    assert st.current_limit.unit == MINUTE and st.current_limit.requests_per_unit == 5
    dur = reset_s(st)
    assert 0 < dur <= 60
    lo, hi = t0 + dur - 1.0, t1 + dur + 1.0
    assert int(hi // 60) * 60 >= lo, (t0, t1, dur)


def test_statuses_in_request_order_and_overall_code(ch):
    a, b = ("user", uniq()), ("user", uniq())
    for _ in range(3):
        call(ch, req("basic", b))  # b spent
    resp = call(ch, req("basic", a, ("free", "x"), b, ("open", "y"), ("nothing", "z")))
    assert resp.overall_code == OVER
    assert [s.code for s in resp.statuses] == [OK, OK, OVER, OK, OK]
    assert [s.limit_remaining for s in resp.statuses] == [2, MAX_U32, 0, 0, 0]
    assert [s.HasField("current_limit") for s in resp.statuses] == [True, False, True, False,
                                                                   False]
    # a's hit counted although b was over: descriptors are decided independently
    assert one(ch, "basic", a).limit_remaining == 1
    resp = call(ch, req("basic", ("user", uniq()), ("free", "x")))
    assert resp.overall_code == OK


def test_one_key_twice_in_a_request_is_counted_in_order(ch):
    u = ("user", uniq())
    resp = call(ch, req("basic", u, u, u, u))
    assert [s.code for s in resp.statuses] == [OK, OK, OK, OVER]
    assert [s.limit_remaining for s in resp.statuses] == [2, 1, 0, 0]


def test_hits_addend_of_the_request_and_of_a_descriptor(ch):
    a, b = ("user", uniq()), ("user", uniq())
    # the request's hits_addend applies to each descriptor
    resp = call(ch, req("basic", a, b, hits=2))
    assert [s.limit_remaining for s in resp.statuses] == [1, 1]
    # a descriptor's own hits_addend wins over the request's; 0 counts nothing
    resp = call(ch, req("basic", {"entries": a, "hits": 0}, {"entries": b, "hits": 1}, hits=3))
    assert [s.code for s in resp.statuses] == [OK, OK]
    assert [s.limit_remaining for s in resp.statuses] == [1, 0]
    # more hits than remain: over, and nothing taken
    st = one(ch, "basic", {"entries": a, "hits": 2})
    assert st.code == OVER
    assert one(ch, "basic", a).limit_remaining == 0
    # asking without counting, once spent: OK (0 more hits fit), nothing left
    st = one(ch, "basic", {"entries": a, "hits": 0})
    assert st.code == OK and st.limit_remaining == 0
    # hits far past the limit (and past 2^32): over, and the key spends nothing
    d = ("user", uniq())
    assert one(ch, "basic", {"entries": d, "hits": 2 ** 40}).code == OVER
    assert one(ch, "basic", {"entries": d, "hits": 2 ** 64 - 1}).code == OVER
    assert one(ch, "basic", d, hits=2 ** 32 - 1).code == OVER
    assert one(ch, "basic", d).limit_remaining == 2
    # the request's 0 means one hit
    c = ("user", uniq())
    assert one(ch, "basic", c, hits=0).limit_remaining == 2


def test_a_descriptors_limit_override(ch):
    # instead of the rule's 3 per hour
    u = ("user", uniq())
    seen = [one(ch, "basic", {"entries": u, "limit": (10, DAY)}) for _ in range(2)]
    assert [s.limit_remaining for s in seen] == [9, 8]
    assert seen[0].current_limit.requests_per_unit == 10
    assert seen[0].current_limit.unit == DAY
    assert 0 < reset_s(seen[0]) <= 86400
    # the rule's own count was not touched
    assert one(ch, "basic", u).limit_remaining == 2
    # a descriptor no rule matches, in a known domain
    n = ("no_such_rule", uniq())
    seen = [one(ch, "basic", {"entries": n, "limit": (2, HOUR)}) for _ in range(3)]
    assert [s.code for s in seen] == [OK, OK, OVER]
    assert [s.limit_remaining for s in seen] == [1, 0, 0]
    assert seen[2].current_limit.requests_per_unit == 2 and seen[2].current_limit.unit == HOUR
    # without the override, no rule: OK, nothing
    st = one(ch, "basic", n)
    assert st.code == OK and not st.HasField("current_limit")


def test_a_limit_override_is_not_in_shadow_mode(ch):
    # the reference's override never takes the rule's shadow_mode
    s = ("shadow", uniq())
    seen = [one(ch, "basic", {"entries": s, "limit": (1, HOUR)}) for _ in range(2)]
    assert [x.code for x in seen] == [OK, OVER]


def test_a_limit_override_of_a_bad_unit_is_invalid_argument(ch):
    u = ("user", uniq())
    code, details = code_of(rls(ch), req("basic", u, {"entries": ("user", uniq()),
                                                      "limit": (5, 0)}), timeout=20)
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    assert "descriptor 1" in details and "limit override" in details
    # a number that is no unit at all
    code, details = code_of(rls(ch), req("basic", u, {"entries": ("user", uniq()),
                                                      "limit": (5, 99)}), timeout=20)
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    assert details == "descriptors[1].limit.unit: 99 is no RateLimitUnit"
    # nothing was taken for the good descriptor beside it
    assert one(ch, "basic", u).limit_remaining == 2


# ---------------------------------------------------------------- rules


def test_unlimited(ch):
    for _ in range(5):
        st = one(ch, "basic", ("free", "x"))
        assert st.code == OK
        assert st.limit_remaining == MAX_U32
        assert not st.HasField("current_limit")


def test_no_rule_is_ok_and_nothing(ch):
    for entries in [("open", "x"), ("nothing", "x"), [("user", "x"), ("deeper", "y")],
                    ("tenant", "t")]:
        resp = call(ch, req("basic", entries))
        st = resp.statuses[0]
        assert resp.overall_code == OK
        assert st.code == OK and st.limit_remaining == 0
        assert not st.HasField("current_limit")
        assert not st.HasField("duration_until_reset")


def test_replaces(ch):
    u = uniq()
    both = req("basic", [("k1", "a"), ("u", u)], [("k2", "b"), ("u", u)])
    resp = call(ch, both)
    # the first is replaced by the second's rule: OK, no limit, not counted
    assert not resp.statuses[0].HasField("current_limit")
    assert resp.statuses[0].code == OK
    assert resp.statuses[1].current_limit.requests_per_unit == 10
    assert resp.statuses[1].limit_remaining == 9
    for _ in range(5):
        call(ch, both)
    # alone, the replaced rule still has its whole budget
    st = one(ch, "basic", [("k1", "a"), ("u", u)])
    assert st.current_limit.requests_per_unit == 5
    assert st.limit_remaining == 4


def test_wildcards(ch):
    v = uniq()
    # /api/* (2 an hour): every value it matches counted apart
    a = [one(ch, "basic", ("path", "/api/" + v)) for _ in range(3)]
    assert [s.code for s in a] == [OK, OK, OVER]
    assert a[0].current_limit.requests_per_unit == 2
    assert one(ch, "basic", ("path", "/api/" + v + "x")).limit_remaining == 1
    # a wildcard in the middle
    assert one(ch, "basic", ("path", "/img/%s.png" % v)).current_limit.requests_per_unit == 1
    # no wildcard matches: the key alone's rule
    for other in ["/img/%s.jpg" % v, "/ap/" + v, "api/" + v]:
        assert one(ch, "basic", ("path", other)).current_limit.requests_per_unit == 10


def test_nested_descriptors_match_their_own_depth(ch):
    t, u = uniq(), uniq()
    two = [("tenant", t), ("user", u)]
    three = two + [("op", "read")]
    assert one(ch, "basic", two).current_limit.requests_per_unit == 2
    assert one(ch, "basic", three).current_limit.requests_per_unit == 4
    # the deeper rule counts apart from the shallower one
    assert one(ch, "basic", two).limit_remaining == 0
    assert one(ch, "basic", three).limit_remaining == 2
    # one level: tenant alone has no rule; user alone is the top level's rule
    assert not one(ch, "basic", ("tenant", t)).HasField("current_limit")
    assert one(ch, "basic", ("user", u)).current_limit.requests_per_unit == 3
    # past the tree
    assert not one(ch, "basic", three + [("x", "y")]).HasField("current_limit")


def test_shadow_mode_is_always_ok_and_still_counted(ch):
    s = ("shadow", uniq())
    seen = [one(ch, "basic", s) for _ in range(4)]
    assert [x.code for x in seen] == [OK] * 4
    assert [x.limit_remaining for x in seen] == [1, 0, 0, 0]
    assert seen[3].current_limit.requests_per_unit == 2
    resp = call(ch, req("basic", s))
    assert resp.overall_code == OK


def test_requests_per_unit_zero_is_always_over_limit(ch):
    for _ in range(3):
        resp = call(ch, req("basic", ("blocked", uniq())))
        assert resp.overall_code == OVER
        st = resp.statuses[0]
        assert st.code == OVER and st.limit_remaining == 0
        assert st.current_limit.requests_per_unit == 0 and st.current_limit.unit == HOUR


def test_an_unknown_domain_is_all_ok(ch):
    resp = call(ch, req("no_such_domain", ("user", "u"), ("blocked", "b"),
                        {"entries": ("user", "v"), "limit": (1, HOUR)}))
    assert resp.overall_code == OK
    assert len(resp.statuses) == 3
    for st in resp.statuses:
        assert st.code == OK and not st.HasField("current_limit")


def test_an_empty_request_is_invalid_argument(ch):
    code, details = code_of(rls(ch), M["req"](domain="basic"), timeout=20)
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    assert details == "rate limit descriptor list must not be empty"
    code, details = code_of(rls(ch), req("", ("user", "u")), timeout=20)
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    assert details == "rate limit domain must not be empty"


# ---------------------------------------------------------------- extensions


def test_token_bucket_with_a_burst(ch):
    # 60 an hour (one a minute) with a burst of 5: five at once, then refused
    k = ("tb", uniq())
    seen = [one(ch, "ext", k) for _ in range(7)]
    assert [s.code for s in seen] == [OK] * 5 + [OVER] * 2
    assert [s.limit_remaining for s in seen[:5]] == [4, 3, 2, 1, 0]
    assert seen[0].current_limit.requests_per_unit == 60
    assert seen[0].current_limit.unit == HOUR


def test_gcra_with_a_burst(ch):
    k = ("gcra", uniq())
    seen = [one(ch, "ext", k) for _ in range(5)]
    assert [s.code for s in seen] == [OK] * 3 + [OVER] * 2
    assert seen[3].duration_until_reset.seconds >= 0


def test_rate_limits_are_taken_all_or_nothing(ch):
    # 5 an hour and 3 a day on one rule
    k = ("multi", uniq())
    st = one(ch, "ext", k, hits=4)
    assert st.code == OVER
    # the day's limit refused: it is the one reported
    assert st.current_limit.requests_per_unit == 3 and st.current_limit.unit == DAY
    # ... and the hour's was not taken from: 3 more fit under both
    st = one(ch, "ext", k, hits=3)
    assert st.code == OK
    assert st.limit_remaining == 0
    assert st.current_limit.unit == DAY  # the least remaining
    st = one(ch, "ext", k)
    assert st.code == OVER
    # a fresh key: the one with the least remaining is reported
    st = one(ch, "ext", ("multi", uniq()))
    assert st.code == OK and st.limit_remaining == 2 and st.current_limit.unit == DAY
    assert st.current_limit.name == "both"


# ---------------------------------------------------------------- the reference's config tests


def rpu(ch, domain, entries):
    st = one(ch, domain, {"entries": entries, "hits": 0})
    return st.current_limit.requests_per_unit if st.HasField("current_limit") else None


def shared(ch, domain, a, b):
    """Whether descriptors a and b count against one state: a hit on a, then b's
    remaining, compared within one window (tried again when a window ended between)."""
    for _ in range(5):
        before = one(ch, domain, {"entries": b, "hits": 0})
        one(ch, domain, a)
        after = one(ch, domain, {"entries": b, "hits": 0})
        if reset_s(after) <= reset_s(before):
            return after.limit_remaining == before.limit_remaining - 1
    pytest.fail("five windows ended within five tries")


def test_reference_wildcards(ch):
    d = "test-wildcard"
    for entries, want in [
            (("noVal", "foo1"), 20), (("wild", "foo1"), 20), (("wild", "foo"), 20),
            ([("nestedWild", "val1"), ("wild", "goo2")], 20), (("wild", "bar"), None),
            (("noWild", "foo1"), None), (("noWild", "foo"), 20), (("midWild", "barab"), 20),
            (("midWild", "bar123b"), 20), (("midWild", "barb"), 20), (("midWild", "bara"), None),
            (("midWild", "xbarb"), None), (("multiWild", "foo123bar456baz"), 10),
            (("multiWild", "foobarbaz"), 10), (("multiWild", "foo123baz"), None),
            (("multiWild", "bar456baz"), None), ([("nestedWild", "val1"), ("wild", "foo1")], None)]:
        assert rpu(ch, d, entries) == want, entries
    # without share_threshold each value a wildcard matches counts apart
    v = uniq()
    assert not shared(ch, d, ("wild", "foo" + v), ("wild", "foo" + v + "x"))
    assert shared(ch, d, ("wild", "foo" + v), ("wild", "foo" + v))


def test_reference_share_threshold(ch):
    d = "test-share"
    v, w = uniq(), uniq()
    assert rpu(ch, d, ("files", "files/" + v)) == 100
    assert shared(ch, d, ("files", "files/" + v), ("files", "files/" + w))
    nested = lambda x: [("nested", "parent"), ("files", "nested/" + x)]  # noqa: E731
    assert rpu(ch, d, nested(v)) == 200
    assert shared(ch, d, nested(v), nested(w))
    top = lambda x, y: [("files", "top/" + x), ("files", "nested/" + y)]  # noqa: E731
    assert rpu(ch, d, top(v, v)) == 300
    assert shared(ch, d, top(v, w), top(w, v))
    # path/* shares, file/* beneath it does not
    mixed = lambda x, y: [("path", "path/" + x), ("file", "file/" + y), ("type", "pdf")]  # noqa
    assert rpu(ch, d, mixed(v, v)) == 120
    assert shared(ch, d, mixed(v, v), mixed(w, v))
    assert not shared(ch, d, mixed(v, v), mixed(v, w))
    # an explicit value before a wildcard; the wildcard's values share
    assert rpu(ch, d, ("file", "test1")) == 50
    assert rpu(ch, d, ("file", "test2")) == 100
    assert shared(ch, d, ("file", "test" + v), ("file", "test" + w))
    assert not shared(ch, d, ("file", "test" + v), ("file", "test1"))
    # middle wildcards, nested
    mid = lambda t, r: [("tenant", "t%sprod" % t), ("resource", "res%sv2" % r)]  # noqa: E731
    assert rpu(ch, d, mid("1", "A")) == 60
    assert shared(ch, d, mid(v, v), mid(w, w))
    assert rpu(ch, d, [("tenant", "t1dev"), ("resource", "resAv2")]) is None


# ---------------------------------------------------------------- README examples


def test_readme_example1(ch):
    assert one(ch, "mongo_cps", ("database", "users")).current_limit.requests_per_unit == 500
    assert one(ch, "mongo_cps", ("database", "default")).current_limit.unit == SECOND
    assert not one(ch, "mongo_cps", ("database", "other")).HasField("current_limit")


def test_readme_example2(ch):
    n = "206" + uniq()
    full = req("messaging", [("message_type", "marketing"), ("to_number", n)], ("to_number", n))
    seen = [call(ch, full) for _ in range(6)]
    # 5 marketing messages a day to a number, 100 messages of any kind
    assert [r.statuses[0].code for r in seen] == [OK] * 5 + [OVER]
    assert [r.overall_code for r in seen] == [OK] * 5 + [OVER]
    assert seen[0].statuses[0].current_limit.requests_per_unit == 5
    assert seen[0].statuses[1].current_limit.requests_per_unit == 100
    assert [r.statuses[1].limit_remaining for r in seen] == list(range(99, 93, -1))
    # each number its own 5
    other = one(ch, "messaging", [("message_type", "marketing"), ("to_number", n + "0")])
    assert other.limit_remaining == 4


def test_readme_example3(ch):
    st = one(ch, "edge_proxy_per_ip", ("remote_address", "50.0.0.1"))
    assert st.code == OK and st.current_limit.requests_per_unit == 10
    for _ in range(3):
        st = one(ch, "edge_proxy_per_ip", ("remote_address", "50.0.0.5"))
        assert st.code == OVER and st.current_limit.requests_per_unit == 0


def test_readme_example4(ch):
    two = [("key", "value"), ("subkey", "subvalue")]
    assert not one(ch, "example4", two).HasField("current_limit")
    assert one(ch, "example4", ("key", "value")).current_limit.requests_per_unit == 300
    assert one(ch, "example4b", two).current_limit.requests_per_unit == 300
    assert not one(ch, "example4b", ("key", "value")).HasField("current_limit")


def test_readme_example5(ch):
    st = one(ch, "internal", ("ldap", "x"))
    assert st.code == OK and st.limit_remaining == MAX_U32 and not st.HasField("current_limit")
    st = one(ch, "internal", ("azure", uniq()))
    assert st.current_limit.requests_per_unit == 100 and st.current_limit.unit == MINUTE


def test_readme_example6(ch):
    a = [("service", "auth-service"), ("user", "user-a")]
    # a's 10 a second in shadow mode: never limited
    assert all(c == OK for c in codes(ch, "example6", a, 15))
    assert one(ch, "example6", a).current_limit.requests_per_unit == 10
    b = one(ch, "example6", [("service", "auth-service"), ("user", "user-b")])
    assert b.current_limit.requests_per_unit == 20


def test_readme_example7(ch):
    d1 = [("key_1", "value_1"), ("user", "bkthomps")]
    d2 = [("key_2", "value_2"), ("user", "bkthomps")]
    assert one(ch, "example7", d1).current_limit.requests_per_unit == 5
    assert one(ch, "example7", d2).current_limit.requests_per_unit == 10
    resp = call(ch, req("example7", d1, d2))
    assert not resp.statuses[0].HasField("current_limit")
    assert resp.statuses[1].current_limit.requests_per_unit == 10


def test_readme_example8(ch):
    st = one(ch, "example8", ("key1", uniq()))
    assert st.current_limit.requests_per_unit == 10
    assert one(ch, "example8", ("key1", "value1")).current_limit.requests_per_unit == 20


def test_readme_example9(ch):
    for k, v in [("key1", "value1"), ("key1", "valueXYZ"), ("path", "/api/123/action"),
                 ("path", "/api/user-id/action"), ("route", "/api/v1/resource/123/action"),
                 ("route", "/api/v2/resource/456/action")]:
        assert one(ch, "example9", (k, v)).current_limit.requests_per_unit == 20, (k, v)
    for k, v in [("key1", "valu"), ("path", "/api/123/other"),
                 ("route", "/api/v1/resource/123/other")]:
        assert not one(ch, "example9", (k, v)).HasField("current_limit"), (k, v)


def test_readme_example10(ch):
    st = one(ch, "example10", [("route", "api"), ("http_method", "GET"), ("subject_id", uniq())])
    assert st.current_limit.requests_per_unit == 60 and st.limit_remaining == 59


def test_readme_example11(tmp_path):
    # its own server: the shared threshold of files/* would be spent by a second run
    s = start_rls(tmp_path, {"example11.yaml": README_EXAMPLES["example11.yaml"]},
                  workdir=str(tmp_path))
    c = open_channel(s)
    try:
        assert codes(c, "example11", ("files", "files/a.pdf"), 5) == [OK] * 5
        assert codes(c, "example11", ("files", "files/b.csv"), 5) == [OK] * 5
        assert one(c, "example11", ("files", "files/c.txt")).code == OVER
        assert codes(c, "example11", ("files_no_share", "files_no_share/a.pdf"), 11) == \
            [OK] * 10 + [OVER]
        assert codes(c, "example11", ("files_no_share", "files_no_share/b.csv"), 10) == [OK] * 10
    finally:
        c.close()
        s.stop()


# ---------------------------------------------------------------- reloads


def poll(what, check, timeout=10.0):
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if got:
            return got
        if time.monotonic() > deadline:
            pytest.fail("not within %.0fs: %s" % (timeout, what))
        time.sleep(0.05)


RELOAD = """\
domain: reload
descriptors:
  - key: user
    rate_limit: {unit: hour, requests_per_unit: %d}
"""


@pytest.fixture
def reloading(tmp_path):
    s = start_rls(tmp_path, {"reload.yaml": RELOAD % 5}, args=["--log-level", "debug"],
                  workdir=str(tmp_path))
    c = open_channel(s)
    yield s, c
    c.close()
    if s.alive():
        s.stop()


def peek(c, u):
    """The status of user u without a hit."""
    return one(c, "reload", {"entries": ("user", u), "hits": 0})


def test_a_changed_file_takes_effect_and_state_survives(reloading):
    s, c = reloading
    u = uniq()
    assert [one(c, "reload", ("user", u)).limit_remaining for _ in range(3)] == [4, 3, 2]
    write(s.envoy_dir / "reload.yaml", RELOAD % 7)
    poll("the new limit in force", lambda: peek(c, u).current_limit.requests_per_unit == 7)
    # the three hits are still there: no fresh budget
    st = one(c, "reload", ("user", u))
    assert st.limit_remaining == 3
    # a new file (a new domain) in the directory
    write(s.envoy_dir / "more.yaml", "domain: more\ndescriptors:\n  - key: k\n"
          "    rate_limit: {unit: day, requests_per_unit: 9}\n")
    poll("the new domain", lambda: one(c, "more", ("k", "v")).HasField("current_limit"))
    assert one(c, "more", ("k", "v")).current_limit.requests_per_unit == 9
    # a lower limit than the count: over at once
    write(s.envoy_dir / "reload.yaml", RELOAD % 2)
    poll("the lower limit", lambda: peek(c, u).current_limit.requests_per_unit == 2)
    assert one(c, "reload", ("user", u)).code == OVER


def test_an_invalid_file_keeps_the_configuration_in_force(reloading):
    s, c = reloading
    u = uniq()
    assert one(c, "reload", ("user", u)).limit_remaining == 4
    write(s.envoy_dir / "reload.yaml",
          "domain: reload\ndescriptors:\n  - key: user\n"
          "    rate_limit: {unit: fortnight, requests_per_unit: 50}\n")
    poll("the refusal logged", lambda: "refused, keeping the one in force" in s.stderr())
    log = s.stderr()
    assert "reload.yaml:4:" in log, log
    assert "fortnight" in log, log
    st = one(c, "reload", ("user", u))
    assert st.current_limit.requests_per_unit == 5 and st.limit_remaining == 3
    # the file fixed, and a second one that breaks the YAML itself: still refused whole
    write(s.envoy_dir / "zz.yaml", "domain: zz\ndescriptors:\n  - key: [unclosed\n")
    write(s.envoy_dir / "reload.yaml", RELOAD % 8)
    poll("the second refusal", lambda: "zz.yaml:" in s.stderr())
    st = one(c, "reload", ("user", u))
    assert st.current_limit.requests_per_unit == 5 and st.limit_remaining == 2
    # the broken file gone: the fixed one in force
    os.unlink(s.envoy_dir / "zz.yaml")
    poll("the fixed file", lambda: peek(c, u).current_limit.requests_per_unit == 8)
    assert one(c, "reload", ("user", u)).limit_remaining == 4
    s.assert_serving()


ALGO = """\
domain: reload
descriptors:
  - key: user
    rate_limit: {unit: hour, requests_per_unit: %d, algorithm: %s}
"""


def used_across_algorithms(s, c):
    """Takes under one algorithm after another, a reload between each: the units used
    carry over (what a policy's reload does), rather than the key's state being refused."""
    u = uniq()
    assert [one(c, "reload", ("user", u)).limit_remaining for _ in range(3)] == [4, 3, 2]
    used = 3
    for n, algo in [(6, "token_bucket"), (7, "gcra"), (8, "sliding_window"),
                    (9, "sliding_log"), (10, "fixed_window")]:
        write(s.envoy_dir / "reload.yaml", ALGO % (n, algo))
        poll(algo + " in force", lambda: peek(c, u).current_limit.requests_per_unit == n)
        st = one(c, "reload", ("user", u))
        used += 1
        assert (st.code, st.limit_remaining) == (OK, n - used), algo


def test_a_reload_that_changes_the_algorithm_keeps_the_units_used(reloading):
    used_across_algorithms(*reloading)


def test_sighup_reloads(reloading):
    s, c = reloading
    u = uniq()
    assert one(c, "reload", ("user", u)).limit_remaining == 4
    write(s.envoy_dir / "reload.yaml", RELOAD % 6)
    s.proc.send_signal(signal.SIGHUP)
    poll("SIGHUP's reload logged", lambda: "(SIGHUP): reloaded" in s.stderr())
    poll("the new limit", lambda: peek(c, u).current_limit.requests_per_unit == 6)
    assert one(c, "reload", ("user", u)).limit_remaining == 4


# ---------------------------------------------------------------- concurrency and redis


def concurrent_exactly(c, domain, key, n):
    """n calls at once on one channel for one descriptor: the number answered OK."""
    stub = rls(c)
    futures = [stub.future(req(domain, (key, "one")), timeout=60) for _ in range(n)]
    got = [f.result().statuses[0].code for f in futures]
    return got.count(OK), got.count(OVER)


CONC = """\
domain: conc
descriptors:
  - key: fw
    rate_limit: {unit: day, requests_per_unit: 50}
  - key: tb
    rate_limit: {unit: day, requests_per_unit: 50, algorithm: token_bucket}
  - key: user
    rate_limit: {name: per_user, unit: hour, requests_per_unit: 3}
  - key: multi
    rate_limit: {unit: hour, requests_per_unit: 5}
    rate_limits:
      - {unit: day, requests_per_unit: 3}
"""


def test_many_concurrent_calls_are_counted_exactly(tmp_path):
    s = start_rls(tmp_path, {"conc.yaml": CONC}, workdir=str(tmp_path))
    c = open_channel(s)
    try:
        assert concurrent_exactly(c, "conc", "fw", 300) == (50, 250)
        assert concurrent_exactly(c, "conc", "tb", 300) == (50, 250)
    finally:
        c.close()
        s.stop()


@pytest.fixture(params=["module", "script"])
def on_redis(request, tmp_path):
    """sluiced on a central redis-server, through the module or the Lua script."""
    r = RedisServer(str(tmp_path / "redis"), module=(request.param == "module")).start()
    s = start_rls(tmp_path, {"conc.yaml": CONC},
                  args=["--store", "redis://127.0.0.1:%d" % r.port, "--store-timeout-ms",
                        "5000"], workdir=str(tmp_path))
    c = open_channel(s)
    yield s, c, r
    c.close()
    if s.alive():
        s.stop()
    r.stop()


def test_on_redis(on_redis):
    s, c, r = on_redis
    u = ("user", uniq())
    seen = [one(c, "conc", u) for _ in range(4)]
    assert [x.code for x in seen] == [OK, OK, OK, OVER]
    assert [x.limit_remaining for x in seen] == [2, 1, 0, 0]
    assert seen[0].current_limit.name == "per_user"
    assert 0 < reset_s(seen[0]) <= 3600
    # hits_addend and a limit override
    v = ("user", uniq())
    assert one(c, "conc", v, hits=2).limit_remaining == 1
    assert one(c, "conc", {"entries": v, "hits": 0}).limit_remaining == 1
    st = one(c, "conc", {"entries": v, "limit": (4, DAY)})
    assert st.limit_remaining == 3 and st.current_limit.unit == DAY
    # windows on the wall clock (Redis's): an override of a minute ends at a whole minute
    t0 = time.time()
    st = one(c, "conc", {"entries": ("user", uniq()), "limit": (5, MINUTE)})
    t1 = time.time()
    dur = reset_s(st)
    assert st.limit_remaining == 4 and 0 < dur <= 60
    assert int((t1 + dur + 1.0) // 60) * 60 >= t0 + dur - 1.0, (t0, t1, dur)
    # rate_limits all or nothing
    m = ("multi", uniq())
    assert one(c, "conc", m, hits=4).code == OVER
    assert one(c, "conc", m, hits=3).code == OK
    # the state is in Redis
    assert r.client().dbsize() > 0


def test_on_redis_a_reload_that_changes_the_algorithm(on_redis):
    s, c, r = on_redis
    write(s.envoy_dir / "reload.yaml", RELOAD % 5)
    poll("the reload domain", lambda: one(c, "reload", ("user", "x")).HasField("current_limit"))
    used_across_algorithms(s, c)


def test_on_redis_reloads_with_calls_in_flight(on_redis):
    # Calls wait on Redis while the configuration they were matched against is replaced:
    # each is answered by the one it started with, and the server stays whole.
    s, c, r = on_redis
    stub = rls(c)
    futures = []
    for i in range(6):
        futures += [stub.future(req("conc", ("user", "f%d" % j), ("multi", "m")), timeout=60)
                    for j in range(40)]
        write(s.envoy_dir / "conc.yaml", CONC.replace("requests_per_unit: 3}",
                                                      "requests_per_unit: %d}" % (3 + i)))
        s.proc.send_signal(signal.SIGHUP)
    for f in futures:
        resp = f.result()
        assert len(resp.statuses) == 2
        assert resp.statuses[0].current_limit.requests_per_unit in range(3, 9)
    poll("the last limit", lambda: one(c, "conc", {"entries": ("user", "x"), "hits": 0})
         .current_limit.requests_per_unit == 8)
    s.assert_serving()


def test_on_redis_concurrent_calls_are_counted_exactly(on_redis):
    s, c, r = on_redis
    assert concurrent_exactly(c, "conc", "fw", 200) == (50, 150)
    assert concurrent_exactly(c, "conc", "tb", 200) == (50, 150)
