"""Windows on the wall clock (docs/algorithms.md, Windows on the clock): sluiced runs its
store on the monotonic clock, yet a fixed or sliding window of a day ends at local
midnight, a week on Monday, a month on the first, at the UTC offset a request or a policy
names; over RESP (UTCOFFSET), HTTP (utc_offset) and policies (utc_offset:). Where each
window ends comes from Python's datetime (tests/testdata/calendar_cases.py)."""

import os
import sys
import time
import uuid

import pytest
import requests

from conftest import Sluiced, free_port
from respclient import Error

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "testdata"))
import calendar_cases as cc  # noqa: E402

# How far reset_after may stray from the model: the reply's rounding up to a
# millisecond, and sluiced's reading of the wall clock at start.
SLACK_MS = 250


def check_window(take, period, offset, algorithm, spans):
    before = time.time()
    d = cc.as_dict(take())
    after = time.time()
    assert d["allowed"] == 1, d
    ends = {cc.window_end(before, period, offset, spans), cc.window_end(after, period, offset, spans)}
    lo = min(ends) - after
    hi = max(ends) - before
    got = d["reset_after_ms"] / 1000.0
    assert lo - SLACK_MS / 1000.0 <= got <= hi + SLACK_MS / 1000.0, \
        "%s %s %s: reset_after %.3fs, model %.3f..%.3fs" % (period, offset, algorithm, got, lo, hi)


@pytest.mark.parametrize("period,offset,algorithm,spans", cc.CASES,
                         ids=["%s-%s-%s" % (p, o, a) for p, o, a, _ in cc.CASES])
def test_resp_windows_fall_on_the_wall_clock(r, key, period, offset, algorithm, spans):
    check_window(lambda: r.execute_command(*cc.command(key, period, offset, algorithm)),
                 period, offset, algorithm, spans)


def test_offsets_are_part_of_the_limit(r):
    """The same numbers at two offsets are two limits (the limit cache keys on the
    offset): one after the other, each answers its own window."""
    for _ in range(3):
        for offset in (None, "-05:00", "+05:30", "Z"):
            k = "cal:" + uuid.uuid4().hex[:8]
            check_window(lambda: r.execute_command(*cc.command(k, "1d", offset, "fixed_window")),
                         "1d", None if offset == "Z" else offset, "fixed_window", 1)


def test_bad_offsets_and_months_are_refused(raw):
    cases = [
        (["SL.TAKE", "k", "5", "1d", "UTCOFFSET", "05:00"], "UTCOFFSET must be +HH:MM"),
        (["SL.TAKE", "k", "5", "1d", "UTCOFFSET", "+18:01"], "UTCOFFSET must be +HH:MM"),
        (["SL.TAKE", "k", "5", "1d", "UTCOFFSET", "+5:30"], "UTCOFFSET must be +HH:MM"),
        (["SL.TAKE", "k", "5", "1d", "UTCOFFSET"], "syntax error: option 'UTCOFFSET' needs a value"),
        (["SL.TAKE", "k", "5", "1mo", "ALGORITHM", "sliding_log"],
         "sliding_log cannot count calendar months"),
        (["SL.TAKE", "k", "5", "1month"], "period is not a duration: use seconds, or a number "
                                         "with ms, s, m, h, d, w or mo"),
        (["SL.TAKE", "k", "5", "900mo"], "period must be a positive duration of at most 73 years"),
    ]
    for args, msg in cases:
        raw.send_command(*args)
        reply = raw.read_reply()
        assert isinstance(reply, Error) and reply.message.startswith("ERR " + msg), (args, reply)
    assert raw.call("PING") == "PONG"


def test_months_as_a_rate(r, key):
    """GCRA meters a rate: 1mo is a mean month (2 629 746 s), not a calendar one."""
    d = cc.as_dict(r.execute_command("SL.TAKE", key, "10", "1mo"))
    assert d["allowed"] == 1 and d["reset_after_ms"] == 262974600


def test_takemany_and_peek_take_the_offset(r, key):
    before = time.time()
    reply = r.execute_command("SL.TAKEMANY", 2, key + ":a", key + ":b",
                              "LIMIT", 5, "1d", "ALGORITHM", "fixed_window", "UTCOFFSET", "-05:00",
                              "LIMIT", 5, "1mo", "ALGORITHM", "fixed_window")
    results = cc.as_dict(reply)["results"]
    a, b = cc.as_dict(results[0]), cc.as_dict(results[1])
    assert abs(a["reset_after_ms"] / 1000 - (cc.window_end(before, "1d", "-05:00") - before)) < 1
    assert abs(b["reset_after_ms"] / 1000 - (cc.window_end(before, "1mo", None) - before)) < 1
    p = cc.as_dict(r.execute_command("SL.PEEK", key + ":a", 5, "1d", "ALGORITHM", "fixed_window",
                                     "UTCOFFSET", "-05:00"))
    assert p["remaining"] == 3 and abs(p["reset_after_ms"] - a["reset_after_ms"]) < 1000


CONFIG = """\
policies:
  daily:
    algorithm: fixed_window
    limit: 3
    period: 1d
    utc_offset: -05:00
    tiers:
      paid: {limit: 10, period: 1mo}
  weekly:
    algorithm: fixed_window
    limit: 3
    period: 1w
"""


@pytest.fixture(scope="module")
def http(tmp_path_factory):
    conf = tmp_path_factory.mktemp("calendar") / "sluice.yaml"
    conf.write_text(CONFIG)
    port = free_port()
    s = Sluiced(args=["--http-port", str(port), "--config", str(conf)]).start()
    s.http_base = "http://127.0.0.1:%d" % port
    yield s
    s.stop()


def test_http_windows_fall_on_the_wall_clock(http):
    sess = requests.Session()
    for period, offset, algorithm, spans in cc.CASES:
        params = {"key": "h:" + uuid.uuid4().hex[:8], "limit": 5, "period": period,
                  "algorithm": algorithm}
        if offset is not None:
            params["utc_offset"] = offset

        def take():
            resp = sess.get(http.http_base + "/v1/check", params=params, timeout=10)
            assert resp.status_code == 200, resp.text
            return resp.json() | {"allowed": 1}
        check_window(take, period, offset, algorithm, spans)

        body = dict(params, key="j:" + uuid.uuid4().hex[:8])

        def take_json():
            resp = sess.post(http.http_base + "/v1/check", json=body, timeout=10)
            assert resp.status_code == 200, resp.text
            return resp.json() | {"allowed": 1}
        check_window(take_json, period, offset, algorithm, spans)
    resp = sess.get(http.http_base + "/v1/check", params={"key": "x", "limit": 5, "period": "1d",
                                                          "utc_offset": "+25:00"}, timeout=10)
    assert resp.status_code == 400 and resp.json()["field"] == "utc_offset", resp.text


def test_policies_take_utc_offset(http):
    c = http.redis()
    k = uuid.uuid4().hex[:8]
    check_window(lambda: c.execute_command("SL.POLICY", "daily", k), "1d", "-05:00",
                 "fixed_window", 1)
    # A tier inherits the policy's offset: a month that begins at 05:00 UTC.
    check_window(lambda: c.execute_command("SL.POLICY", "daily", k, "TIER", "paid"), "1mo",
                 "-05:00", "fixed_window", 1)
    check_window(lambda: c.execute_command("SL.POLICY", "weekly", k), "1w", None,
                 "fixed_window", 1)
    c.close()


def test_bad_policy_offsets_are_refused(make_server, tmp_path):
    for text, msg in [("    utc_offset: 5h\n", "utc_offset must be"),
                      ("    algorithm: sliding_log\n    period: 1mo\n",
                       "sliding_log cannot count calendar months")]:
        cfg = tmp_path / "bad.yaml"
        cfg.write_text("policies:\n  p:\n    limit: 3\n" + text +
                       ("" if "period" in text else "    period: 1d\n"))
        s = make_server(args=["--config", str(cfg)], start=False)
        s.launch()
        assert s.proc.wait(timeout=20) == 2
        assert "bad.yaml:" in s.stderr() and msg in s.stderr(), s.stderr()


def test_sighup_aligns_reloaded_policies(make_server, tmp_path):
    """A policy added by a reload gets sluiced's clock offset too: its day still ends at
    midnight at its UTC offset."""
    import signal
    cfg = tmp_path / "reload.yaml"
    cfg.write_text("policies:\n  first: {limit: 3, period: 1h}\n")
    s = make_server(args=["--config", str(cfg)])
    cfg.write_text(CONFIG)
    os.kill(s.proc.pid, signal.SIGHUP)
    c = s.redis()
    deadline = time.monotonic() + 10
    while True:
        try:
            c.execute_command("SL.PEEK", "probe", 1, 1)  # a round trip
            c.execute_command("SL.POLICY", "daily", "probe", "COST", 0)
            break
        except Exception as e:  # unknown policy until the reload is applied
            assert "unknown policy" in str(e), e
            assert time.monotonic() < deadline, "the reload was not applied"
            time.sleep(0.05)
    check_window(lambda: c.execute_command("SL.POLICY", "daily", uuid.uuid4().hex[:8]), "1d",
                 "-05:00", "fixed_window", 1)
    c.close()
