"""One state per key: a key keeps the units it has used across a policy's tiers and across a
SIGHUP that changes its limits (carried states, docs/configuration.md), and an ad-hoc request
that names another algorithm on a key is refused instead of resetting it."""

import os
import signal
import time

import requests

from respclient import Error, as_map
from conftest import write

CONFIG = """\
policies:
  api:
    limit: 1000
    period: 1h
    tiers:
      free: {limit: 100, period: 1h}
      paid: {limit: 10000, period: 1h}
      windowed: {algorithm: sliding_window, limit: 200, period: 1h}
      logged: {algorithm: sliding_log, limit: 300, period: 1h}
"""


def start(make_server, tmp_path, text=CONFIG, extra=()):
    cfg = tmp_path / "sluice.yaml"
    write(cfg, text)
    s = make_server(args=["--config", str(cfg)] + list(extra))
    s.config = cfg
    return s


def policy(c, *args):
    return as_map(c.call("SL.POLICY", *args))


def spend(c, key, tier, n):
    for _ in range(n):
        d = policy(c, "api", key, "TIER", tier)
        assert d["allowed"] == 1, d
    return d


def test_an_upgrade_keeps_what_was_used_in_units(make_server, tmp_path):
    s = start(make_server, tmp_path)
    with s.conn() as c:
        assert spend(c, "u1", "free", 100)["remaining"] == 0
        assert policy(c, "api", "u1", "TIER", "free")["allowed"] == 0
        d = policy(c, "api", "u1", "TIER", "paid")
        # 100 used of 10 000, not 60 s of debt at 6 ms a request
        assert (d["allowed"], d["limit"], d["remaining"]) == (1, 10000, 9899), d


def test_switching_tiers_of_other_algorithms_gives_no_fresh_budget(make_server, tmp_path):
    s = start(make_server, tmp_path)
    with s.conn() as c:
        spend(c, "u2", "free", 100)
        # free -> windowed (a sliding window) -> logged (a sliding log) -> default -> free
        d = policy(c, "api", "u2", "TIER", "windowed")
        assert (d["allowed"], d["remaining"]) == (1, 99), d
        d = policy(c, "api", "u2", "TIER", "logged")
        assert (d["allowed"], d["remaining"]) == (1, 198), d
        d = policy(c, "api", "u2")
        assert (d["allowed"], d["remaining"]) == (1, 897), d
        d = policy(c, "api", "u2", "TIER", "free")
        assert d["allowed"] == 0, "back on free after 103 used: %r" % (d,)
        # the refusal says when the state, as it is, will have shed enough
        assert 0 < d["retry_after_ms"] <= 3600000, d
        assert policy(c, "api", "u2", "TIER", "free")["allowed"] == 0


def test_a_downgrade_has_nothing_left(make_server, tmp_path):
    s = start(make_server, tmp_path)
    with s.conn() as c:
        spend(c, "u3", "paid", 500)
        d = policy(c, "api", "u3", "TIER", "free")
        assert d["allowed"] == 0, d
        # and the paid state is untouched by the refusal
        d = policy(c, "api", "u3", "TIER", "paid")
        assert (d["allowed"], d["remaining"]) == (1, 9499), d


def test_sighup_that_changes_the_algorithm_keeps_each_keys_units(make_server, tmp_path):
    s = start(make_server, tmp_path)
    with s.conn() as c:
        spend(c, "k", "free", 40)
        spend(c, "k2", "logged", 7)
        text = CONFIG.replace("free: {limit: 100, period: 1h}",
                              "free: {algorithm: fixed_window, limit: 50, period: 1h}")
        text = text.replace("logged: {algorithm: sliding_log, limit: 300, period: 1h}",
                            "logged: {algorithm: sliding_log, limit: 20, period: 1h}")
        write(s.config, text)
        before = len(s.stderr())
        os.kill(s.proc.pid, signal.SIGHUP)
        deadline = time.monotonic() + 10
        while "reloaded" not in s.stderr()[before:]:
            assert time.monotonic() < deadline, s.stderr()[before:]
            time.sleep(0.05)
        log = s.stderr()[before:]
        assert ("policy 'api' tier 'free': gcra 100 per 3600s, burst 100 -> fixed_window 50 per 3600s,"
                " burst 50: each key keeps the units it has used") in log, log
        assert "policy 'api' tier 'logged': sliding_log 300" in log, log
        d = policy(c, "api", "k", "TIER", "free")
        assert (d["allowed"], d["limit"], d["remaining"]) == (1, 50, 9), d
        # a sliding log whose limit changed keeps its timestamps
        d = policy(c, "api", "k2", "TIER", "logged")
        assert (d["allowed"], d["limit"], d["remaining"]) == (1, 20, 12), d


def test_sighup_that_changes_the_key_template_says_so_loudly(make_server, tmp_path):
    s = start(make_server, tmp_path)
    with s.conn() as c:
        policy(c, "api", "k")
        write(s.config, CONFIG.replace("    period: 1h\n    tiers:",
                                       "    period: 1h\n    key: \"v2:{key}\"\n    tiers:", 1))
        before = len(s.stderr())
        os.kill(s.proc.pid, signal.SIGHUP)
        deadline = time.monotonic() + 10
        while "reloaded" not in s.stderr()[before:]:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert "every key STARTS AGAIN with a full budget" in s.stderr()[before:]


def test_ad_hoc_algorithm_change_is_refused_not_reset(server, key):
    with server.conn() as c:
        for _ in range(3):
            assert as_map(c.call("SL.TAKE", key, 3, 60))["allowed"] == 1
        assert as_map(c.call("SL.TAKE", key, 3, 60))["allowed"] == 0
        c.send_command("SL.TAKE", key, 3, 60, "ALGORITHM", "token_bucket")
        e = c.read_reply()
        assert isinstance(e, Error) and e.message.startswith("WRONGTYPE key holds a state of "
                                                             "another algorithm"), e
        c.send_command("SL.PEEK", key, 3, 60, "ALGORITHM", "fixed_window")
        assert isinstance(c.read_reply(), Error)
        # nothing changed, and SL.RESET is the way to start it again
        assert as_map(c.call("SL.TAKE", key, 3, 60))["allowed"] == 0
        assert c.call("SL.RESET", key) == 1
        assert as_map(c.call("SL.TAKE", key, 3, 60, "ALGORITHM", "token_bucket"))["allowed"] == 1


def test_ad_hoc_sliding_log_resize_keeps_its_timestamps(server, key):
    with server.conn() as c:
        for _ in range(5):
            c.call("SL.TAKE", key, 5, 60, "ALGORITHM", "sliding_log")
        d = as_map(c.call("SL.TAKE", key, 8, 60, "ALGORITHM", "sliding_log"))
        assert (d["allowed"], d["remaining"]) == (1, 2), d


def test_http_answers_409_for_another_algorithm(make_server, key):
    from conftest import free_port
    port = free_port()
    s = make_server(args=["--http-port", str(port)])
    url = "http://127.0.0.1:%d/v1/check" % port
    assert requests.get(url, params={"key": key, "limit": 5, "period": 60}).status_code == 200
    r = requests.get(url, params={"key": key, "limit": 5, "period": 60,
                                  "algorithm": "sliding_window"})
    assert (r.status_code, r.reason) == (409, "Conflict"), (r.status_code, r.reason, r.text)
    assert "another algorithm" in r.json()["error"], r.text
    assert s.alive()
