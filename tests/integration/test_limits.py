"""Several limits in one policy, each with its own cost (issue 20, item 1): requests and
tokens per key, taken all or nothing with the policy's global limits, over RESP, HTTP and
forward-auth, on the embedded store and on a central Redis (module and script); tiers
carry a limit's units by its name; a reload matches limits by name."""

import os
import signal
import sys
import time

import pytest
import requests

from conftest import Sluiced, free_port, write
from respclient import Error, as_map

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from redis_server import RedisServer  # noqa: E402

CONFIG = """\
policies:
  chat:
    key: "chat:{key}"
    limits:
      - {name: rpm, limit: 5, period: 1h}
      - {name: tpm, limit: 1000, period: 1h, cost: tokens}
    tiers:
      paid:
        limits:
          - {name: rpm, limit: 50, period: 1h}
          - {name: tpm, limit: 100000, period: 1h, cost: tokens}
    global:
      limits: [{name: tpm, limit: 1500, period: 1h, cost: tokens}]
  tokens_only: {limit: 100, period: 1h, cost: tokens}
  quota:
    limits:
      - {name: rpm, limit: 60, period: 1m}
      - {name: monthly, limit: 1000000, period: 1mo, algorithm: fixed_window, cost: tokens,
         utc_offset: "+05:30"}
"""


def text(v):
    return v.decode() if isinstance(v, bytes) else v


def policy(c, *args):
    return {text(k): text(v) for k, v in as_map(c.call("SL.POLICY", *args)).items()}


def used(c, key):
    """The units a key's state holds (SL.INSPECT), 0 for a key never written."""
    d = c.call("SL.INSPECT", key)
    return 0 if d is None else {text(k): v for k, v in as_map(d).items()}["used"]


@pytest.fixture
def server(config_server):
    return config_server(CONFIG)


def test_requests_and_tokens_are_taken_together(server):
    with server.conn() as c:
        d = policy(c, "chat", "k", "TOKENS", 400)
        # rpm has 4 requests left, tpm 600 tokens (one more such request), the global tpm
        # 1100 (two): tpm binds, the limit that admits the fewest more requests like it
        assert (d["allowed"], d["binding"], d["scope"], d["remaining"]) == \
            (1, "chat.tpm", "key", 600), d
        assert used(c, "{chat:k}\x1frpm") == 1 and used(c, "{chat:k}\x1ftpm") == 400
        assert used(c, "{\x1fglobal\x1fchat}\x1ftpm") == 400
        # 700 tokens do not fit in the 600 left: refused by tpm (index 1), and nothing is
        # taken from any limit
        d = policy(c, "chat", "k", "TOKENS", 700)
        assert (d["allowed"], d["rejected_by"], d["binding"], d["limit"], d["remaining"]) == \
            (0, 1, "chat.tpm", 1000, 600), d
        assert d["retry_after_ms"] > 0
        assert used(c, "{chat:k}\x1frpm") == 1 and used(c, "{chat:k}\x1ftpm") == 400
        assert used(c, "{\x1fglobal\x1fchat}\x1ftpm") == 400
        # COST charges the limits of requests, TOKENS those of tokens
        d = policy(c, "chat", "k", "COST", 2, "TOKENS", 600)
        assert (d["allowed"], d["binding"], d["remaining"]) == (1, "chat.tpm", 0), d
        assert used(c, "{chat:k}\x1frpm") == 3 and used(c, "{chat:k}\x1ftpm") == 1000
        # no TOKENS: no tokens are charged, so the spent tpm does not hold it back, nor
        # binds: rpm does, with 1 left
        d = policy(c, "chat", "k")
        assert (d["allowed"], d["binding"], d["remaining"]) == (1, "chat.rpm", 1), d
        assert used(c, "{chat:k}\x1frpm") == 4
        # the global tpm (1500) has 500 left, shared by every key: another key's 600 is
        # refused by it (index 2), its own limits untouched
        d = policy(c, "chat", "other", "TOKENS", 600)
        assert (d["allowed"], d["rejected_by"], d["scope"], d["binding"], d["remaining"]) == \
            (0, 2, "global", "chat.global.tpm", 500), d
        assert used(c, "{chat:other}\x1frpm") == 0
        assert policy(c, "chat", "other", "TOKENS", 500)["allowed"] == 1
        # a policy of one limit charged in tokens
        d = policy(c, "tokens_only", "t", "TOKENS", 60, "COST", 50)
        assert (d["allowed"], d["remaining"], d["binding"]) == (1, 40, "tokens_only"), d
        assert used(c, "tokens_only:t") == 60


def test_a_tier_carries_each_limit_by_its_name(server):
    with server.conn() as c:
        for _ in range(5):
            assert policy(c, "chat", "t", "TOKENS", 10)["allowed"] == 1
        assert policy(c, "chat", "t")["allowed"] == 0, "rpm (5) is spent"
        d = policy(c, "chat", "t", "TIER", "paid", "TOKENS", 10)
        # the paid rpm is the same state at 50: 5 used, this one the 6th
        assert (d["allowed"], d["binding"], d["remaining"]) == (1, "chat.rpm", 44), d
        assert used(c, "{chat:t}\x1ftpm") == 60


def test_bad_arguments_are_named(server):
    with server.conn() as c:
        for args, msg in [
            (("TOKENS", -1), "ERR tokens must be a non-negative integer"),
            (("TOKENS", "many"), "ERR value is not an integer or out of range"),
            (("TOKENS", 1, "TOKENS", 2), "ERR syntax error: option 'TOKENS' is given twice"),
            (("TOKENS",), "ERR syntax error: SL.POLICY policy key [COST cost] [TOKENS tokens] "
                          "[TIER tier]"),
            (("BYTES", 3), "ERR syntax error: unknown option 'BYTES' (SL.POLICY policy key "
                           "[COST cost] [TOKENS tokens] [TIER tier])"),
        ]:
            c.send_command("SL.POLICY", "chat", "bad", *args)
            e = c.read_reply()
            assert isinstance(e, Error) and e.message == msg, (args, e)
        assert used(c, "{chat:bad}\x1frpm") == 0
        assert c.call("PING") == "PONG"


def test_http_names_every_limit_in_the_ietf_fields(server):
    r = requests.post(server.url + "/v1/check", json={"policy": "chat", "key": "h", "tokens": 300})
    assert r.status_code == 200, r.text
    assert r.headers["RateLimit-Policy"] == \
        '"chat.rpm";q=5;w=3600, "chat.tpm";q=1000;w=3600, "chat.global.tpm";q=1500;w=3600'
    assert r.headers["RateLimit"].startswith('"chat.rpm";r=4;t=720, "chat.tpm";r=700;t='), r.headers
    assert '"chat.global.tpm";r=1200;t=' in r.headers["RateLimit"]
    # 700 tokens left is two more requests of 300, fewer than rpm's 4: tpm binds
    assert (r.headers["X-RateLimit-Limit"], r.headers["X-RateLimit-Remaining"]) == ("1000", "700")
    assert r.json()["binding"] == "chat.tpm" and r.json()["scope"] == "key"
    r = requests.get(server.url + "/v1/check",
                     params={"policy": "chat", "key": "h", "tokens": 800, "cost": 1})
    assert r.status_code == 429, r.text
    body = r.json()
    assert (body["rejected_by"], body["binding"], body["remaining"]) == (1, "chat.tpm", 700), body
    assert int(r.headers["Retry-After"]) >= 1
    assert r.headers["X-RateLimit-Limit"] == "1000"
    # tokens belong to a policy, and are counted, not written in words
    for params, field in [({"key": "x", "limit": 5, "period": 60, "tokens": 3}, "tokens"),
                          ({"policy": "chat", "key": "x", "tokens": -3}, "tokens"),
                          ({"policy": "chat", "key": "x", "tokens": "3x"}, "tokens")]:
        r = requests.get(server.url + "/v1/check", params=params)
        assert r.status_code == 400 and r.json()["field"] == field, (params, r.text)
    r = requests.post(server.url + "/v1/check", json={"policy": "chat", "key": "x",
                                                      "tokens": 1.5})
    assert r.status_code == 400 and r.json()["field"] == "tokens", r.text


def test_forward_auth_charges_the_tokens_of_its_url(server):
    url = server.url + "/v1/auth/chat?tokens=400"
    for status in (200, 200):
        r = requests.get(url, headers={"X-Api-Key": "fa"})
        assert r.status_code == status, r.text
    r = requests.get(url, headers={"X-Api-Key": "fa"})
    assert r.status_code == 429 and "Retry-After" in r.headers, r.text
    assert '"chat.tpm";r=200;' in r.headers["RateLimit"], r.headers
    # Envoy's form: the client's own query string is not read
    r = requests.get(server.url + "/v1/auth/chat/v1/complete?tokens=0",
                     headers={"X-Api-Key": "fa2"})
    assert r.status_code == 200, r.text


def test_policies_list_every_limit(server):
    with server.conn() as c:
        chat = [as_map(p) for p in c.call("SL.POLICIES") if as_map(p)["name"] == b"chat"][0]
        names = [(text(as_map(l)["name"]), text(as_map(l)["cost"])) for l in chat["limits"]]
        assert names == [("chat.rpm", "requests"), ("chat.tpm", "tokens")]
        g = [text(as_map(l)["name"]) for l in chat["global"]]
        assert g == ["chat.global.tpm"]


def test_a_reload_keeps_each_limits_units_by_name(server):
    with server.conn() as c:
        assert policy(c, "chat", "r", "TOKENS", 300)["allowed"] == 1
        before = server.stderr()
        # tpm doubled, rpm dropped, rpd added; the order changed
        write(server.config, CONFIG.replace(
            "      - {name: rpm, limit: 5, period: 1h}\n"
            "      - {name: tpm, limit: 1000, period: 1h, cost: tokens}\n",
            "      - {name: tpm, limit: 2000, period: 1h, cost: tokens}\n"
            "      - {name: rpd, limit: 7, period: 1d}\n").replace("limit: 1500,", "limit: 5000,"))
        os.kill(server.proc.pid, signal.SIGHUP)
        deadline = time.monotonic() + 10
        while "limit 'rpd' added" not in server.stderr()[len(before):]:
            assert time.monotonic() < deadline, server.stderr()[len(before):]
            time.sleep(0.05)
        log = server.stderr()[len(before):]
        assert "policy 'chat' limit 'rpm' removed" in log, log
        assert "policy 'chat' limit 'tpm': gcra 1000 per 3600s" in log, log
        d = policy(c, "chat", "r", "TOKENS", 1700)
        assert (d["allowed"], d["binding"]) == (1, "chat.tpm"), \
            "the 300 tokens used before the reload still count: %r" % (d,)
        d = policy(c, "chat", "r", "TOKENS", 1)
        assert (d["allowed"], d["rejected_by"]) == (0, 0), d


@pytest.fixture(params=["module", "script"])
def central(request, tmp_path):
    redis = RedisServer(str(tmp_path / "redis"), module=(request.param == "module")).start()
    cfg = tmp_path / "sluice.yaml"
    write(cfg, CONFIG)
    s = Sluiced(args=["--store", "redis://127.0.0.1:%d" % redis.port, "--config", str(cfg),
                      "--store-timeout-ms", "2000"], workdir=str(tmp_path / "s"))
    os.makedirs(s.workdir, exist_ok=True)
    s.start()
    yield s
    s.stop()
    redis.stop()


def test_a_central_redis_takes_them_all_or_nothing(central):
    with central.conn() as c:
        d = policy(c, "chat", "k", "TOKENS", 900)
        assert (d["allowed"], d["binding"], d["remaining"]) == (1, "chat.tpm", 100), d
        d = policy(c, "chat", "k", "TOKENS", 200)
        assert (d["allowed"], d["rejected_by"], d["remaining"]) == (0, 1, 100), d
        d = policy(c, "chat", "k2", "TOKENS", 601)
        assert (d["allowed"], d["rejected_by"], d["binding"]) == (0, 2, "chat.global.tpm"), d
        d = policy(c, "chat", "k", "TOKENS", 100)
        assert (d["allowed"], d["binding"], d["remaining"]) == (1, "chat.tpm", 0), d
        for _ in range(3):
            assert policy(c, "chat", "k")["allowed"] == 1
        d = policy(c, "chat", "k")
        assert (d["allowed"], d["rejected_by"], d["binding"]) == (0, 0, "chat.rpm"), \
            "the refused takes above took no request: 5 admitted in all, %r" % (d,)


def month_end(now, offset_minutes):
    """The end of the calendar month holding `now` at that UTC offset, in Unix seconds."""
    import datetime
    tz = datetime.timezone(datetime.timedelta(minutes=offset_minutes))
    local = datetime.datetime.fromtimestamp(now, tz)
    year, month = (local.year + 1, 1) if local.month == 12 else (local.year, local.month + 1)
    return datetime.datetime(year, month, 1, tzinfo=tz).timestamp()


def test_usage_tells_what_each_limit_used_and_has_left(server):
    with server.conn() as c:
        assert policy(c, "quota", "u", "TOKENS", 1234)["allowed"] == 1
        assert policy(c, "quota", "u", "COST", 2, "TOKENS", 66)["allowed"] == 1
        before = time.time()
        got = [{text(k): text(v) for k, v in as_map(m).items()}
               for m in c.call("SL.USAGE", "u", "POLICY", "quota")]
        after = time.time()
        assert [(g["name"], g["limit"], g["used"], g["remaining"]) for g in got] == [
            ("quota.rpm", 60, 3, 57), ("quota.monthly", 1000000, 1300, 998700)], got
        end = got[1]["reset_after_ms"] / 1000.0
        assert month_end(before, 330) - after - 1 <= end <= month_end(after, 330) - before + 1, \
            "the month ends at midnight at +05:30"
        again = [as_map(m)["used"] for m in c.call("SL.USAGE", "u", "POLICY", "quota")]
        assert again == [3, 1300], "asking consumes nothing"
        assert [as_map(m)["used"] for m in c.call("SL.USAGE", "nobody", "POLICY", "quota")] == \
            [0, 0]
        for args, msg in [(("u",), "ERR wrong number of arguments for 'sl.usage' command"),
                          (("u", "POLICY"), "ERR wrong number of arguments for 'sl.usage' command"),
                          (("u", "TIER", "x", "X", "y"),
                           "ERR syntax error: SL.USAGE key POLICY policy [TIER tier]"),
                          (("u", "TIER", "x"), "ERR syntax error: SL.USAGE key POLICY policy "
                                               "[TIER tier] (the limits are a policy's)"),
                          (("u", "POLICY", "nope"), "ERR unknown policy 'nope'")]:
            c.send_command("SL.USAGE", *args)
            e = c.read_reply()
            assert isinstance(e, Error) and e.message == msg, (args, e)
    r = requests.get(server.url + "/v1/usage", params={"policy": "quota", "key": "u"})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["policy"] == "quota"
    assert [(l["name"], l["used"], l["remaining"]) for l in body["limits"]] == \
        [("quota.rpm", 3, 57), ("quota.monthly", 1300, 998700)], body
    for params, field in [({"key": "u"}, "policy"), ({"policy": "quota", "key": "u", "cost": 2},
                                                      "cost"),
                          ({"policy": "quota", "key": "u", "tokens": 2}, "tokens"),
                          ({"policy": "nope", "key": "u"}, "policy")]:
        r = requests.get(server.url + "/v1/usage", params=params)
        assert r.status_code == 400 and r.json()["field"] == field, (params, r.text)
    assert requests.post(server.url + "/v1/usage").status_code == 405


def test_the_recipe_runs_as_written(make_server, tmp_path):
    """docs/recipes.md's LLM API: its config and plans file, as the page gives them."""
    page = open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "docs",
                             "recipes.md")).read()
    yaml = page.split("```yaml\n")[1].split("```")[0]
    plans = page.split("plans.txt`, one")[1].split("```\n")[1].split("```")[0]
    write(tmp_path / "sluice.yaml", yaml)
    write(tmp_path / "plans.txt", plans)
    http = free_port()
    s = make_server(args=["--config", str(tmp_path / "sluice.yaml"), "--http-port", str(http)])
    with s.conn() as c:
        d = policy(c, "chat", "sk-live-8f2a", "TOKENS", 1500)
        assert (d["allowed"], d["binding"], d["limit"], d["remaining"]) == \
            (1, "chat.tpm", 1000000, 998500), "a paid key, from the file: %r" % (d,)
        d = policy(c, "chat", "sk-free-0001", "TOKENS", 50000)
        assert (d["allowed"], d["binding"]) == (0, "chat.tpm"), "a free key: 40 000 a minute"
        usage = [text(as_map(m)["name"]) for m in c.call("SL.USAGE", "sk-live-8f2a", "POLICY",
                                                         "chat")]
        assert usage == ["chat.rpm", "chat.tpm", "chat.month", "chat.global.tpm"]
    r = requests.get("http://127.0.0.1:%d/v1/check" % http,
                     params={"policy": "chat", "key": "sk-live-8f2a", "tokens": 1500})
    assert r.headers["RateLimit-Policy"] == (
        '"chat.rpm";q=3000;w=60, "chat.tpm";q=1000000;w=60, "chat.month";q=100000000;w=2629746, '
        '"chat.global.tpm";q=20000000;w=60'), r.headers
    r = requests.get("http://127.0.0.1:%d/v1/check" % http,
                     params={"policy": "chat", "key": "sk-live-8f2a", "tier": "free"})
    assert r.status_code == 400 and r.json()["field"] == "tier"
