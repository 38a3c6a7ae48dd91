"""Windows of months that begin on a reset day (docs/algorithms.md, Windows on the clock;
docs/configuration.md, reset_day): a billing cycle from the 15th to the 15th, at a UTC
offset, the 29th to 31st on a shorter month's last day. Over RESP (RESETDAY), HTTP
(reset_day) and policies (reset_day:), on sluiced's own store and on a central Redis
(--store redis://, through the module and through the Lua script). sluiced has no test
clock: where each window ends comes from Python's datetime (tests/testdata/
calendar_cases.py), for today's date, and each reply's reset_after_ms must agree."""

import os
import signal
import sys
import time
import uuid

import pytest
import requests

from conftest import Sluiced, free_port
from respclient import Error

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "testdata"))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
import calendar_cases as cc  # noqa: E402
from redis_server import RedisServer  # noqa: E402

# The reply's rounding up to a millisecond, and sluiced's reading of the wall clock at
# start (as tests/integration/test_calendar.py allows).
SLACK_MS = 250
IDS = ["%s-%s-%s-day%d" % (p, o, a, d) for p, o, a, _, d in cc.DAY_CASES]


def check_window(take, period, offset, spans, day):
    """take() answers a decision whose reset_after_ms must end where the model's window
    (spans windows on) ends, for the time before or after the call."""
    before = time.time()
    d = cc.as_dict(take())
    after = time.time()
    assert d["allowed"] == 1, d
    ends = [cc.window_end(t, period, offset, spans, day) for t in (before, after)]
    got = d["reset_after_ms"] / 1000.0
    lo, hi = min(ends) - after - SLACK_MS / 1000.0, max(ends) - before + SLACK_MS / 1000.0
    assert lo <= got <= hi, "%s %s day %d: reset_after %.3fs, model %.3f..%.3fs" % (
        period, offset, day, got, lo, hi)
    return d


@pytest.mark.parametrize("period,offset,algorithm,spans,day", cc.DAY_CASES, ids=IDS)
def test_resp_windows_begin_on_the_reset_day(r, period, offset, algorithm, spans, day):
    k = "rd:" + uuid.uuid4().hex[:8]
    check_window(lambda: r.execute_command(*cc.command(k, period, offset, algorithm,
                                                       reset_day=day)),
                 period, offset, spans, day)


def test_the_same_limit_on_other_days_is_another_limit(r):
    """The limit cache keys on the day: one after the other, each answers its own."""
    for _ in range(2):
        for day in (None, 1, 9, 23, 31):
            k = "rd:" + uuid.uuid4().hex[:8]
            check_window(lambda: r.execute_command(*cc.command(k, "1mo", "-05:00",
                                                               "fixed_window", reset_day=day)),
                         "1mo", "-05:00", 1, day or 1)


def test_bad_reset_days_are_refused(raw):
    cases = [
        (["SL.TAKE", "k", "5", "1mo", "ALGORITHM", "fixed_window", "RESETDAY", "0"],
         "RESETDAY must be a day of the month, 1 to 31 (got '0')"),
        (["SL.TAKE", "k", "5", "1mo", "ALGORITHM", "fixed_window", "RESETDAY", "32"],
         "RESETDAY must be a day of the month, 1 to 31 (got '32')"),
        (["SL.TAKE", "k", "5", "1d", "ALGORITHM", "fixed_window", "RESETDAY", "15"],
         "RESETDAY is the day of the month windows of months begin on"),
        (["SL.PEEK", "k", "5", "1mo", "RESETDAY", "15"],
         "RESETDAY needs ALGORITHM fixed_window or sliding_window"),
    ]
    for args, msg in cases:
        raw.send_command(*args)
        reply = raw.read_reply()
        assert isinstance(reply, Error) and reply.message.startswith("ERR " + msg), (args, reply)
    assert raw.call("PING") == "PONG"


CONFIG = """\
policies:
  billing:
    algorithm: fixed_window
    limit: 1000
    period: 1mo
    reset_day: 15
    utc_offset: -05:00
    tiers:
      paid: {limit: 100000, period: 1mo}
      month_end: {limit: 10, period: 1mo, reset_day: 31}
  plan:
    algorithm: fixed_window
    limits:
      - {name: monthly, limit: 3000, period: 1mo, reset_day: 28}
      - {name: daily, limit: 200, period: 1d}
"""


@pytest.fixture(scope="module")
def http(tmp_path_factory):
    conf = tmp_path_factory.mktemp("reset_day") / "sluice.yaml"
    conf.write_text(CONFIG)
    port = free_port()
    s = Sluiced(args=["--http-port", str(port), "--config", str(conf)]).start()
    s.http_base = "http://127.0.0.1:%d" % port
    yield s
    s.stop()


def test_http_takes_reset_day(http):
    sess = requests.Session()
    for period, offset, algorithm, spans, day in cc.DAY_CASES:
        params = {"key": "h:" + uuid.uuid4().hex[:8], "limit": 5, "period": period,
                  "algorithm": algorithm, "reset_day": day}
        if offset is not None:
            params["utc_offset"] = offset

        def take():
            resp = sess.get(http.http_base + "/v1/check", params=params, timeout=10)
            assert resp.status_code == 200, resp.text
            return resp.json() | {"allowed": 1}
        check_window(take, period, offset, spans, day)
        body = dict(params, key="j:" + uuid.uuid4().hex[:8])

        def take_json():
            resp = sess.post(http.http_base + "/v1/check", json=body, timeout=10)
            assert resp.status_code == 200, resp.text
            return resp.json() | {"allowed": 1}
        check_window(take_json, period, offset, spans, day)
    for params in ({"key": "x", "limit": 5, "period": "1d", "algorithm": "fixed_window",
                    "reset_day": 15},
                   {"key": "x", "limit": 5, "period": "1mo", "algorithm": "fixed_window",
                    "reset_day": 40},
                   {"key": "x", "limit": 5, "period": "1mo", "reset_day": 15}):
        resp = sess.get(http.http_base + "/v1/check", params=params, timeout=10)
        assert resp.status_code == 400 and resp.json()["field"] == "reset_day", resp.text


def test_policies_and_their_usage_reset_on_the_day(http):
    c = http.redis()
    k = uuid.uuid4().hex[:8]
    check_window(lambda: c.execute_command("SL.POLICY", "billing", k), "1mo", "-05:00", 1, 15)
    # a tier inherits the day and the offset, or gives its own day
    check_window(lambda: c.execute_command("SL.POLICY", "billing", k, "TIER", "paid"), "1mo",
                 "-05:00", 1, 15)
    check_window(lambda: c.execute_command("SL.POLICY", "billing", k, "TIER", "month_end"),
                 "1mo", "-05:00", 1, 31)
    # SL.USAGE and GET /v1/usage: each limit's reset_after_ms, the monthly one on the 28th
    c.execute_command("SL.POLICY", "plan", k, "COST", 4)
    before = time.time()
    usage = c.execute_command("SL.USAGE", k, "POLICY", "plan")
    resp = requests.get(http.http_base + "/v1/usage", params={"policy": "plan", "key": k},
                        timeout=10)
    after = time.time()
    assert resp.status_code == 200, resp.text
    monthly = [d for d in map(cc.as_dict, usage) if "monthly" in str(d["name"])][0]
    body = [u for u in resp.json()["limits"] if u["name"].endswith("monthly")][0]
    end = cc.window_end(before, "1mo", None, 1, 28)
    assert cc.window_end(after, "1mo", None, 1, 28) == end, "a reset day passed during the test"
    for got in (monthly, body):
        assert got["used"] == 4 and got["remaining"] == 2996, got
        assert end - after - SLACK_MS / 1000 <= got["reset_after_ms"] / 1000 <= \
            end - before + SLACK_MS / 1000, (got, end, before)
    c.close()


def test_a_reset_day_where_it_means_nothing_stops_the_start(make_server, tmp_path):
    for text, msg in [
            ("    algorithm: fixed_window\n    period: 1d\n    reset_day: 15\n",
             "policy 'p': reset_day is the day of the month windows of months begin on (1 to 31)"),
            ("    algorithm: fixed_window\n    period: 1mo\n    reset_day: 32\n",
             "policy 'p': reset_day must be a day of the month, 1 to 31"),
            ("    period: 1mo\n    reset_day: 15\n",
             "policy 'p': reset_day needs fixed_window or sliding_window")]:
        cfg = tmp_path / "bad.yaml"
        cfg.write_text("policies:\n  p:\n    limit: 3\n" + text)
        s = make_server(args=["--config", str(cfg)], start=False)
        s.launch()
        assert s.proc.wait(timeout=20) == 2
        assert "bad.yaml:" in s.stderr() and msg in s.stderr(), s.stderr()


def test_sighup_that_moves_the_reset_day_says_so_loudly(make_server, tmp_path):
    cfg = tmp_path / "sluice.yaml"
    cfg.write_text(CONFIG)
    s = make_server(args=["--config", str(cfg)])
    c = s.redis()
    k = uuid.uuid4().hex[:8]
    c.execute_command("SL.POLICY", "billing", k, "COST", 5)
    cfg.write_text(CONFIG.replace("reset_day: 15", "reset_day: 20"))
    before = len(s.stderr())
    os.kill(s.proc.pid, signal.SIGHUP)
    deadline = time.monotonic() + 10
    while "reloaded" not in s.stderr()[before:]:
        assert time.monotonic() < deadline, s.stderr()[before:]
        time.sleep(0.05)
    log = s.stderr()[before:]
    assert "policy 'billing': reset_day 15 -> 20: windows of months now begin on day 20" in log, log
    assert "STARTS AGAIN with a full budget" in log, log
    assert "policy 'billing' tier 'paid': reset_day 15 -> 20" in log, log
    assert "tier 'month_end'" not in log, log
    # the reloaded policy's windows end on the 20th
    check_window(lambda: c.execute_command("SL.POLICY", "billing", uuid.uuid4().hex[:8]),
                 "1mo", "-05:00", 1, 20)
    c.close()


# ---- on a central Redis ----

@pytest.fixture(params=["module", "script"])
def central(request, tmp_path):
    """sluiced on a central redis-server, with the module or with the Lua script."""
    redis = RedisServer(str(tmp_path / "redis"), module=request.param == "module").start()
    conf = tmp_path / "sluice.yaml"
    conf.write_text(CONFIG)
    s = Sluiced(args=["--store", "redis://127.0.0.1:%d" % redis.port, "--store-timeout-ms",
                      "2000", "--config", str(conf)], workdir=str(tmp_path / "s"))
    os.makedirs(s.workdir, exist_ok=True)
    s.start()
    yield s, redis
    s.stop()
    redis.stop()


def test_a_central_store_resets_on_the_day(central):
    s, redis = central
    c = s.redis()
    for period, offset, algorithm, spans, day in cc.DAY_CASES:
        k = "c:" + uuid.uuid4().hex[:8]
        check_window(lambda: c.execute_command(*cc.command(k, period, offset, algorithm,
                                                           reset_day=day)),
                     period, offset, spans, day)
    k = uuid.uuid4().hex[:8]
    check_window(lambda: c.execute_command("SL.POLICY", "billing", k), "1mo", "-05:00", 1, 15)
    check_window(lambda: c.execute_command("SL.POLICY", "billing", k, "TIER", "month_end"),
                 "1mo", "-05:00", 1, 31)
    # the state is in Redis, not in sluiced
    r = redis.client()
    assert r.exists("billing:" + k) == 1
    r.close()
    c.close()
