"""SL.POLICY: named policies from the YAML file (--config, docs/configuration.md), tiers,
global limits, shadow mode, SIGHUP reload."""

import os
import signal
import subprocess
import time

import pytest

from respclient import Error, as_map
from conftest import write

CONFIG = """\
server:
  max_key_bytes: 8           # the command line's --max-key-bytes wins where given

policies:
  api:
    algorithm: gcra
    limit: 100
    period: 1h
    burst: 20
    key: "api:{key}"
    tiers:
      free: {limit: 100, period: 1h}
      paid: {limit: 10000, period: 1h, burst: 500}

  login:
    algorithm: sliding_log
    limit: 5
    period: 15m

  dry:
    limit: 1
    period: 1h
    shadow: true

  shared:
    limit: 100
    period: 1h
    global: {limit: 3, period: 1h}

  wide:
    limit: 100
    period: 1h
    global: {limit: 10, period: 1h}

  slowglobal:
    limit: 1
    period: 10m
    global: {limit: 2, period: 1h}

  dryglobal:
    limit: 100
    period: 1h
    global: {limit: 1, period: 1h}
    shadow: true
"""


@pytest.fixture
def policy_server(make_server, tmp_path):
    cfg = tmp_path / "sluice.yaml"
    write(cfg, CONFIG)
    s = make_server(args=["--config", str(cfg), "--max-key-bytes", "64"])
    s.config = cfg
    return s


def policy(c, *args):
    d = as_map(c.call("SL.POLICY", *args))
    return {k: v.decode() if isinstance(v, bytes) else v for k, v in d.items()}


def test_policy_take(policy_server):
    with policy_server.conn() as c:
        d = policy(c, "api", "user1")
        assert (d["allowed"], d["limit"], d["remaining"]) == (1, 20, 19), d
        d = policy(c, "api", "user1", "COST", 5)
        assert (d["allowed"], d["remaining"]) == (1, 14), d
        d = policy(c, "api", "user1", "COST", 15)
        assert (d["allowed"], d["remaining"]) == (0, 14), d
        # the key template: the state lives under api:user1
        assert c.call("SL.RESET", "api:user1") == 1
        assert policy(c, "api", "user1")["remaining"] == 19


def test_policy_resp3_is_a_map(policy_server):
    with policy_server.conn() as c:
        c.call("HELLO", "3")
        assert isinstance(c.call("SL.POLICY", "api", "r3"), dict)


def test_policy_tiers(policy_server):
    with policy_server.conn() as c:
        d = policy(c, "api", "t1", "TIER", "paid")
        assert (d["allowed"], d["limit"], d["remaining"]) == (1, 500, 499), d
        d = policy(c, "api", "t2", "TIER", "free")
        assert (d["limit"], d["remaining"]) == (100, 99), d
        c.send_command("SL.POLICY", "api", "t1", "TIER", "gold")
        e = c.read_reply()
        assert isinstance(e, Error) and e.message == "ERR unknown tier 'gold' for policy 'api'", e


def test_policy_algorithm(policy_server):
    with policy_server.conn() as c:
        for i in range(5):
            assert policy(c, "login", "alice")["remaining"] == 4 - i
        d = policy(c, "login", "alice")
        assert d["allowed"] == 0 and 0 < d["retry_after_ms"] <= 15 * 60 * 1000


def test_policy_shadow(policy_server):
    with policy_server.conn() as c:
        d = policy(c, "dry", "bob")
        assert d["allowed"] == 1 and d.get("shadow") == 1 and d.get("would_allow") == 1, d
        assert d["would_retry_after_ms"] == 0, d
        d = policy(c, "dry", "bob")
        assert d["allowed"] == 1, "shadow mode always allows: %r" % (d,)
        assert d.get("shadow") == 1 and d.get("would_allow") == 0, d
        # nothing a client acts on says wait; the real wait is there for the operator
        assert (d["retry_after_ms"], d["rejected_by"]) == (0, -1), d
        assert 0 < d["would_retry_after_ms"] <= 3600 * 1000, d
        # a shadow global limit: the same, and the scope says which would have refused
        assert policy(c, "dryglobal", "g1")["would_allow"] == 1
        d = policy(c, "dryglobal", "g2")
        assert (d["allowed"], d["rejected_by"], d["retry_after_ms"]) == (1, -1, 0), d
        assert (d["would_allow"], d["scope"], d["limit"]) == (0, "global", 1), d


def info_stats(c):
    text = c.call("INFO", "stats")
    text = text.decode() if isinstance(text, bytes) else text
    return dict(l.split(":", 1) for l in text.splitlines() if ":" in l)


def test_shadow_refusals_are_counted_apart_and_logged_once_per_interval(policy_server):
    s = policy_server
    with s.conn() as c:
        before = info_stats(c)
        started = time.monotonic()
        for _ in range(20):
            policy(c, "dry", "carol")  # the first would be admitted, 19 refused
        elapsed = time.monotonic() - started
        after = info_stats(c)
    delta = {k: int(after[k]) - int(before[k])
             for k in ("decisions_allowed", "decisions_rejected", "decisions_shadow_rejected")}
    assert delta == {"decisions_allowed": 1, "decisions_rejected": 0,
                     "decisions_shadow_rejected": 19}, delta
    lines = [l for l in s.stderr().splitlines() if "shadow policy 'dry' would have refused" in l]
    # one line at the first refusal, then at most one more per 10 s interval
    assert 1 <= len(lines) <= 1 + int(elapsed // 10), lines
    assert "would have refused 1 request " in lines[0], lines


def test_policy_reply_names_the_binding_limit(policy_server):
    with policy_server.conn() as c:
        # wide: 100 per key, 10 in all: after one take the key has 99 left
        # and everyone 9, so the global limit is what binds
        d = policy(c, "wide", "w0")
        assert (d["allowed"], d["rejected_by"], d["scope"]) == (1, -1, "global"), d
        assert (d["limit"], d["remaining"]) == (10, 9), d
        # a policy without a global limit: the key's, always
        d = policy(c, "api", "scoped")
        assert (d["rejected_by"], d["scope"], d["remaining"]) == (-1, "key", 19), d
        for i in range(1, 10):
            policy(c, "wide", "w%d" % i)
        # the global limit is spent: a peek (COST 0) passes, but says so
        d = policy(c, "wide", "fresh", "COST", 0)
        assert (d["allowed"], d["scope"], d["remaining"]) == (1, "global", 0), d
        # and a take is refused by it
        d = policy(c, "wide", "fresh")
        assert (d["allowed"], d["rejected_by"], d["scope"], d["limit"]) == (0, 1, "global", 10), d
        assert d["retry_after_ms"] > 0, d


def test_policy_refused_by_both_shows_the_longer_wait(policy_server):
    with policy_server.conn() as c:
        # slowglobal: 1 per 10 minutes per key, 2 per hour in all
        policy(c, "slowglobal", "a")
        policy(c, "slowglobal", "b")
        d = policy(c, "slowglobal", "a")
        assert (d["allowed"], d["rejected_by"]) == (0, 0), "the key's limit refused first"
        # the global limit frees a unit only after 30 minutes: that is the wait
        assert (d["scope"], d["limit"]) == ("global", 2), d
        assert 29 * 60 * 1000 < d["retry_after_ms"] <= 30 * 60 * 1000, d


def test_policy_global_limit_all_or_nothing(policy_server):
    with policy_server.conn() as c:
        allowed = [policy(c, "shared", "k%d" % i)["allowed"] for i in range(5)]
        assert allowed == [1, 1, 1, 0, 0], "a global limit of 3 across keys: %r" % allowed
        # k3 and k4 were refused by the global limit: nothing taken from their own limit
        assert as_map(c.call("SL.PEEK", "shared:k3", 100, 3600, "COST", 0))["remaining"] == 100
        assert as_map(c.call("SL.PEEK", "shared:k0", 100, 3600, "COST", 0))["remaining"] == 99


def test_policy_errors(policy_server):
    with policy_server.conn() as c:
        for args, want in ((("nope", "k"), "ERR unknown policy 'nope'"),
                           (("api", "k", "COST", "x"), None), (("api", "k", "FOO", "1"), None),
                           (("api", "k", "TIER"), None)):
            c.send_command("SL.POLICY", *args)
            e = c.read_reply()
            assert isinstance(e, Error) and e.message.startswith("ERR "), (args, e)
            if want:
                assert e.message == want
        assert c.call("PING") == "PONG"


def test_flag_wins_over_file(policy_server):
    # the file says max_key_bytes 8, the command line 64
    with policy_server.conn() as c:
        assert as_map(c.call("SL.TAKE", "k" * 64, 1, 60))["allowed"] == 1


def wait_for(pred, timeout=10, what="condition"):
    deadline = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < deadline, "timed out waiting for " + what
        time.sleep(0.05)


def test_sighup_reload_keeps_state(policy_server):
    s = policy_server
    with s.conn() as c:
        for _ in range(3):
            policy(c, "api", "keep")
        write(s.config, CONFIG.replace("  login:\n", "  added:\n    limit: 7\n    period: 1h\n\n  login:\n"))
        os.kill(s.proc.pid, signal.SIGHUP)

        def has_added():
            c.send_command("SL.POLICY", "added", "x")
            return not isinstance(c.read_reply(), Error)

        wait_for(has_added, what="the reloaded policy 'added'")
        assert policy(c, "added", "y")["limit"] == 7
        assert policy(c, "api", "keep")["remaining"] == 16, "SIGHUP lost state"


def test_sighup_bad_file_keeps_old_policies(policy_server):
    s = policy_server
    with s.conn() as c:
        policy(c, "api", "u")
        write(s.config, CONFIG.replace("limit: 5\n", "limit: abc\n"))
        before = s.stderr()
        os.kill(s.proc.pid, signal.SIGHUP)
        wait_for(lambda: len(s.stderr()) > len(before) and "sluice.yaml:" in s.stderr()[len(before):],
                 what="the refusal in the log")
        line = [l for l in s.stderr()[len(before):].splitlines() if "sluice.yaml:" in l][0]
        # file:line:col: the 'limit: abc' line of the login policy
        lineno = CONFIG.splitlines().index("    limit: 5") + 1
        assert "sluice.yaml:%d:" % lineno in line, line
        assert policy(c, "login", "z")["remaining"] == 4, "the old policies stay"
        assert policy(c, "api", "u")["remaining"] == 18


def test_bad_file_at_start_is_refused(make_server, tmp_path):
    cfg = tmp_path / "bad.yaml"
    write(cfg, "policies:\n  api:\n    limit: 10\n    period: soon\n")
    s = make_server(args=["--config", str(cfg)], start=False)
    s.launch()
    try:
        rc = s.proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        s.kill()
        pytest.fail("sluiced started with a bad config file")
    assert rc != 0
    assert "bad.yaml:4:" in s.stderr(), s.stderr()


def test_policy_options_given_twice_are_refused(policy_server):
    with policy_server.conn() as c:
        for args, opt in ((("api", "k", "COST", 1, "COST", 2), "COST"),
                          (("api", "k", "TIER", "free", "tier", "paid"), "TIER")):
            c.send_command("SL.POLICY", *args)
            e = c.read_reply()
            assert isinstance(e, Error) and \
                e.message == "ERR syntax error: option '%s' is given twice" % opt, (args, e)
        assert c.call("SL.INSPECT", "api:k") is None, "nothing was taken"
