"""What operators ask of a running sluiced over RESP: SL.INSPECT (a key's state, unchanged),
SL.POLICIES (the policies in force) and SAVE (the snapshot, now)."""

import os

from respclient import Error, as_map

CONFIG = """\
policies:
  api:
    limit: 100
    period: 1h
    tiers:
      paid: {algorithm: sliding_window, limit: 1000, period: 1h}
    global: {limit: 5000, period: 1h}
  login:
    algorithm: sliding_log
    limit: 5
    period: 15m
    shadow: true
"""


def plain(v):
    """A reply with bulk strings decoded, maps as dicts, all the way down."""
    if isinstance(v, bytes):
        return v.decode()
    if isinstance(v, dict):
        return {plain(k): plain(x) for k, x in v.items()}
    if isinstance(v, list):
        return [plain(x) for x in v]
    return v


def info(c, key):
    r = c.call("SL.INSPECT", key)
    return None if r is None else plain(as_map(r))


def start(make_server, tmp_path, extra=()):
    cfg = tmp_path / "sluice.yaml"
    cfg.write_text(CONFIG)
    return make_server(args=["--config", str(cfg)] + list(extra))


def test_inspect_describes_a_key_and_changes_nothing(make_server, tmp_path):
    s = start(make_server, tmp_path)
    with s.conn() as c:
        assert c.call("SL.INSPECT", "nobody") is None
        for _ in range(3):
            c.call("SL.TAKE", "adhoc", 10, 60)
        d = info(c, "adhoc")
        assert (d["algorithm"], d["bytes"], d["carried"]) == ("gcra", 16, 0), d
        assert 0 < d["reset_after_ms"] <= 18000 + 2, "to about a ms (the store's tick): %r" % (d,)
        for _ in range(7):
            c.call("SL.POLICY", "api", "u1")
        d = info(c, "api:u1")
        assert (d["algorithm"], d["carried"], d["limit"], d["period_ms"], d["used"]) == \
            ("gcra", 1, 100, 3600000, 7), d
        assert d["bytes"] == 32, "a policy's state names its limit: 16 bytes more"
        assert info(c, "api:u1")["used"] == 7, "inspecting takes nothing"
        c.call("SL.POLICY", "api", "u1", "TIER", "paid")
        d = info(c, "api:u1")
        assert (d["algorithm"], d["limit"], d["used"]) == ("sliding_window", 1000, 8), d
        c.send_command("SL.INSPECT", "")
        e = c.read_reply()
        assert isinstance(e, Error) and e.message.startswith("ERR key is empty or too long"), e


def test_policies_lists_what_is_in_force(make_server, tmp_path):
    s = start(make_server, tmp_path)
    with s.conn() as c:
        ps = [plain(as_map(p)) for p in c.call("SL.POLICIES")]
        assert [p["name"] for p in ps] == ["api", "login"]
        api, login = ps
        assert [plain(as_map(l)) for l in api["limits"]] == [
            {"name": "api", "algorithm": "gcra", "limit": 100, "period_ms": 3600000, "burst": 100,
             "cost": "requests"}]
        assert api["key"] == "{policy}:{key}" and api["shadow"] == 0
        tiers = plain(as_map(api["tiers"]))
        assert plain(as_map(tiers["paid"][0]))["algorithm"] == "sliding_window"
        g = plain(as_map(api["global"][0]))
        assert (g["name"], g["limit"]) == ("api.global", 5000), g
        assert login["global"] == [] and login["shadow"] == 1
    with make_server().conn() as c:
        assert c.call("SL.POLICIES") == [], "no config file: no policies"


def test_save_writes_the_snapshot_now(make_server, tmp_path):
    snap = tmp_path / "state.snap"
    s = start(make_server, tmp_path, ["--snapshot", str(snap), "--snapshot-interval", "0"])
    with s.conn() as c:
        for _ in range(4):
            c.call("SL.TAKE", "saved", 10, 3600)
        assert c.call("SAVE") == "OK"
        assert snap.exists() and snap.stat().st_size > 48
    s.kill()  # no snapshot at shutdown: what SAVE wrote is what comes back
    s.start()
    with s.conn() as c:
        assert as_map(c.call("SL.PEEK", "saved", 10, 3600, "COST", 0))["remaining"] == 6


def test_save_errors_name_the_cause_and_the_server_goes_on(make_server, tmp_path):
    with make_server().conn() as c:
        c.send_command("SAVE")
        e = c.read_reply()
        assert isinstance(e, Error) and "--snapshot" in e.message, e
    d = tmp_path / "gone"
    d.mkdir()
    s = start(make_server, tmp_path, ["--snapshot", str(d / "state.snap")])
    os.rmdir(str(d))
    with s.conn() as c:
        c.send_command("SAVE")
        e = c.read_reply()
        assert isinstance(e, Error) and "No such file or directory" in e.message, e
        assert c.call("PING") == "PONG"
    d.mkdir()  # so that the snapshot at shutdown can be written


def test_the_same_over_http_behind_the_token(make_server, tmp_path):
    import requests
    from conftest import free_port
    http = free_port()
    cfg = tmp_path / "sluice.yaml"
    cfg.write_text(CONFIG)
    s = make_server(args=["--config", str(cfg), "--http-port", str(http)], password="pw")
    url = "http://127.0.0.1:%d" % http
    auth = {"Authorization": "Bearer pw"}
    with s.conn() as c:
        c.call("AUTH", "pw")
        for _ in range(3):
            c.call("SL.POLICY", "api", "a b/c")
    assert requests.get(url + "/v1/keys/api:a%20b%2Fc").status_code == 401, "behind the token"
    r = requests.get(url + "/v1/keys/api:a%20b%2Fc", headers=auth)
    assert r.status_code == 200, r.text
    d = r.json()
    assert (d["algorithm"], d["carried"], d["limit"], d["used"], d["bytes"]) == \
        ("gcra", True, 100, 3, 32), d
    r = requests.get(url + "/v1/keys/nobody", headers=auth)
    assert r.status_code == 404 and r.json()["field"] == "key", r.text
    assert requests.delete(url + "/v1/keys/nobody", headers=auth).json() == {"reset": False}
    assert requests.delete(url + "/v1/keys/api:a%20b%2Fc", headers=auth).json() == {"reset": True}
    assert requests.get(url + "/v1/keys/api:a%20b%2Fc", headers=auth).status_code == 404
    assert requests.put(url + "/v1/keys/x", headers=auth).status_code == 405
    ps = requests.get(url + "/v1/policies", headers=auth).json()["policies"]
    assert [p["name"] for p in ps] == ["api", "login"]
    assert ps[0]["tiers"]["paid"] == [{"name": "api", "algorithm": "sliding_window",
                                       "limit": 1000, "period_ms": 3600000, "burst": 1000,
                                       "cost": "requests", "utc_offset": "+00:00"}]
    assert ps[0]["global"][0]["limit"] == 5000 and ps[1]["global"] == [] and ps[1]["shadow"]
    assert requests.get(url + "/v1/policies").status_code == 401


def test_policies_show_where_a_quotas_windows_begin(make_server, tmp_path):
    import requests
    from conftest import free_port
    cfg = tmp_path / "quota.yaml"
    cfg.write_text("policies:\n  quota: {limit: 1000, period: 1mo, algorithm: fixed_window,"
                   " utc_offset: \"-08:00\", reset_day: 15}\n"
                   "  daily: {limit: 5, period: 1d, algorithm: sliding_window,"
                   " utc_offset: \"+05:30\"}\n")
    http = free_port()
    s = make_server(args=["--config", str(cfg), "--http-port", str(http)])
    with s.conn() as c:
        q, d = [plain(as_map(plain(as_map(p))["limits"][0])) for p in c.call("SL.POLICIES")]
    assert (q["utc_offset"], q["months"], q["reset_day"]) == ("-08:00", 1, 15), q
    assert d["utc_offset"] == "+05:30" and "months" not in d, d
    ps = requests.get("http://127.0.0.1:%d/v1/policies" % http).json()["policies"]
    assert ps[0]["limits"][0]["reset_day"] == 15 and ps[1]["limits"][0]["utc_offset"] == "+05:30"
