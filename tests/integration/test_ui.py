"""The live page (docs/observability.md, "The live page"): GET /ui, GET /v1/stats and GET
/v1/simulate, against a real sluiced; and the page itself in a real browser (Debian's
headless chromium, driven over the DevTools protocol: cdp.py).

What holds:
- /v1/stats and the page's tables show what /metrics shows at the same moment: decisions by
  policy and outcome, store-down fallbacks, keys, bytes, evictions, the latency histogram's
  percentiles (upper bounds of its buckets, nearest rank); and the decisions of each of the
  last 60 seconds, which add up to the counts.
- Both sit behind the HTTP token; a browser may send it as HTTP Basic's password, on GET of
  the page's paths only (and /v1/top); a bad parameter is a 400 naming it.
- Every policy name and key is text in the page, never markup: a policy called
  <script>...</script> shows as those characters, and the page runs one script, its own
  (Content-Security-Policy with a nonce).
- "Try a limit" runs the simulator: a valid SVG, the same bytes for the same query,
  bounded (a 400 naming the bound), at most 2 at once (503 to retry), off the workers'
  loops (a held simulation does not stop a worker from serving), and a shutdown waits for
  one in flight.
- In chromium, the page signs in with Basic, updates every second, and its numbers equal
  /metrics and /v1/stats read once the load is paused; the top keys equal /v1/top when the
  server serves it (else the page says "top keys: not available"); the try-a-limit panel
  shows the plot, or the error naming the field. Screenshots (a laptop's width and a
  phone's) are kept in build/test-artifacts/ui/.
"""

import base64
import html.parser
import json
import os
import re
import signal
import socket
import threading
import time
import xml.etree.ElementTree as ET

import pytest
import requests

from conftest import ROOT, Sluiced, free_port, write
from respclient import Conn, pipeline

TOKEN = "ui-s3cret"
# A policy name that is every character HTML treats specially, and a script.
EVIL = "<script>alert(1)</script> & \"q\" 's"
EVIL_KEY = "<u>k</u> & \"q\""
CONFIG = """
policies:
  api:
    limit: 5
    period: 1h
  '%s':
    limit: 3
    period: 1h
  dry:
    limit: 2
    period: 1h
    shadow: true
""" % EVIL.replace("'", "''")
ARTIFACTS = os.path.join(ROOT, "build", "test-artifacts", "ui")
OUTCOMES = ("allowed", "refused", "shadow_refused")
METRIC_OUTCOME = {"allowed": "allowed", "refused": "rejected", "shadow_refused": "shadow_rejected"}
ALGORITHMS = ("gcra", "token_bucket", "leaky_bucket", "fixed_window", "sliding_log",
              "sliding_window")
TRAFFIC = ("steady", "bursty", "poisson", "boundary", "ramp")


def basic(user, password):
    return "Basic " + base64.b64encode(("%s:%s" % (user, password)).encode()).decode()


BEARER = {"Authorization": "Bearer " + TOKEN}
BASIC = {"Authorization": basic("operator", TOKEN)}


def start(tmp_path, extra=(), env=None, monkeypatch=None):
    cfg = tmp_path / "sluice.yaml"
    write(cfg, CONFIG)
    http = free_port()
    if env:
        for k, v in env.items():
            monkeypatch.setenv(k, v)
    s = Sluiced(args=["--config", str(cfg), "--http-port", str(http), "--http-token", TOKEN]
                + list(extra), workdir=str(tmp_path))
    s.start()
    s.url = "http://127.0.0.1:%d" % http
    s.http = http
    s.config = cfg
    return s


@pytest.fixture(scope="module")
def ui(tmp_path_factory):
    """One sluiced with the policies above and some decisions of every kind: api refused
    past 5 a key, the evil policy, the shadow policy past 2, ad hoc."""
    s = start(tmp_path_factory.mktemp("ui"))
    with s.conn() as c:
        for i in range(8):
            c.call("SL.POLICY", "api", "user:%d" % (i % 2))
        for i in range(4):
            c.call("SL.POLICY", EVIL, "k")
        for i in range(5):
            c.call("SL.POLICY", "dry", "d")
        for i in range(6):
            c.call("SL.TAKE", "adhoc:1", 4, "1h")
        c.call("SL.TAKE", EVIL_KEY, 4, "1h")
    yield s
    s.stop()


def get(s, path, headers=BEARER, **kw):
    return requests.get(s.url + path, headers=headers, timeout=30, **kw)


# ---- /metrics, read as a table ----

LINE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def unescape(v):
    return re.sub(r'\\(.)', lambda m: "\n" if m.group(1) == "n" else m.group(1), v)


def metrics(s):
    """{(name, ((label, value), ...)): float} of GET /metrics."""
    r = get(s, "/metrics")
    assert r.status_code == 200, r.text
    out = {}
    for line in r.text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = LINE.match(line)
        assert m, line
        labels = tuple(sorted((k, unescape(v)) for k, v in LABEL.findall(m.group(2) or "")))
        out[(m.group(1), labels)] = float(m.group(3))
    return out


def metric(m, name, **labels):
    return m[(name, tuple(sorted(labels.items())))]


def decisions_of(m):
    """{policy or None: {outcome: n}} from sluice_decisions_total."""
    out = {}
    for (name, labels), v in m.items():
        if name == "sluice_decisions_total":
            d = dict(labels)
            pol = d["policy"] or None
            out.setdefault(pol, {})
            for o, mo in METRIC_OUTCOME.items():
                if d["outcome"] == mo:
                    out[pol][o] = int(v)
    return out


def quantile_us(m, proto, permille):
    """The upper bound in microseconds of the bucket holding the permille-th request of the
    histogram (nearest rank), as the page states it: 0 for no request, -1 past the last
    finite bound."""
    buckets = sorted(((float(dict(l)["le"]), int(v)) for (n, l), v in m.items()
                      if n == "sluice_request_duration_seconds_bucket"
                      and dict(l)["proto"] == proto), key=lambda b: b[0])
    count = buckets[-1][1]
    if count == 0:
        return 0
    rank = max(1, (count * permille + 999) // 1000)
    for le, cum in buckets:
        if cum >= rank:
            return -1 if le == float("inf") else round(le * 1e6)
    raise AssertionError("the +Inf bucket holds every request")


def check_against_metrics(st, m):
    """/v1/stats's numbers (or the page's, in the same shape) against /metrics."""
    want = decisions_of(m)
    got = {d["policy"]: {o: d[o] for o in OUTCOMES} for d in st["decisions"]}
    assert got == want
    for d in st["decisions"]:
        for mode in ("fail_open", "fail_closed", "local"):
            key = ("sluice_store_fallback_decisions_total",
                   (("mode", mode), ("policy", d["policy"] or "")))
            assert d["fallback"][mode] == int(m.get(key, 0)), (d["policy"], mode)
    store = st["store"]
    assert store["keys"] == metric(m, "sluice_keys")
    assert store["bytes"] == metric(m, "sluice_store_bytes")
    assert store["max_bytes"] == metric(m, "sluice_store_max_bytes")
    assert store["evictions"] == metric(m, "sluice_evictions_total")
    assert store["reclaimed"] == metric(m, "sluice_reclaimed_total")
    assert store["errors"] == metric(m, "sluice_store_errors_total")


# ---- /v1/stats ----

def test_stats_shape(ui):
    r = get(ui, "/v1/stats")
    assert r.status_code == 200, r.text
    assert r.headers["Content-Type"] == "application/json"
    st = r.json()
    assert set(st) >= {"version", "unix_ms", "uptime_s", "interval_ms", "decisions", "store",
                       "latency", "latency_buckets_us", "backend", "connections", "commands"}
    assert st["interval_ms"] == 1000
    assert abs(st["unix_ms"] / 1000 - time.time()) < 3600  # the wall clock, in ms
    assert [d["policy"] for d in st["decisions"]] == [None, "api", EVIL, "dry"]
    for d in st["decisions"]:
        assert set(d["per_second"]) == set(OUTCOMES)
        assert len({len(v) for v in d["per_second"].values()}) == 1
        assert all(len(v) <= 60 for v in d["per_second"].values())
        assert set(d["fallback"]) == {"fail_open", "fail_closed", "local"}
    assert [d.get("shadow") for d in st["decisions"]] == [None, False, False, True]
    assert [l["proto"] for l in st["latency"]] == ["resp", "http", "grpc"]
    assert st["latency_buckets_us"][0] == 5 and st["latency_buckets_us"][-1] == 100000
    assert st["backend"]["store"] == "memory" and st["backend"]["state"] == "up"
    assert st["backend"]["up"] is True and st["backend"]["breaker_open"] is False
    assert st["backend"]["remote"] is False
    assert set(st["store"]) == {"local", "keys", "bytes", "max_bytes", "evictions",
                                "reclaimed", "errors"}
    assert "adaptive" not in st, "no adaptive limit is configured or used"


def test_stats_equal_metrics_at_the_same_moment(ui):
    st = get(ui, "/v1/stats").json()
    m = metrics(ui)
    check_against_metrics(st, m)
    by = {d["policy"]: d for d in st["decisions"]}
    assert (by["api"]["allowed"], by["api"]["refused"]) == (8, 0)
    assert (by[EVIL]["allowed"], by[EVIL]["refused"]) == (3, 1)
    assert (by["dry"]["allowed"], by["dry"]["shadow_refused"]) == (2, 3)
    assert (by[None]["allowed"], by[None]["refused"]) == (5, 2)  # adhoc:1, EVIL_KEY
    # RESP's histogram changes no more (HTTP's grows with every request, these included)
    resp = st["latency"][0]
    assert resp["count"] == metric(m, "sluice_request_duration_seconds_count", proto="resp")
    for q, permille in (("p50", 500), ("p90", 900), ("p99", 990), ("p999", 999)):
        assert (resp[q + "_us"] or -1) == quantile_us(m, "resp", permille), q


def test_the_last_minute_adds_up_to_the_counts(ui):
    # The sampler reads the counters once a second from the start: once it has read
    # them after the module's decisions, each policy's seconds sum to its counts.
    deadline = time.monotonic() + 10
    while True:
        st = get(ui, "/v1/stats").json()
        sums = {(d["policy"], o): sum(d["per_second"][o]) for d in st["decisions"]
                for o in OUTCOMES}
        counts = {(d["policy"], o): d[o] for d in st["decisions"] for o in OUTCOMES}
        if sums == counts:
            break
        assert time.monotonic() < deadline, (sums, counts)
        time.sleep(0.2)
    assert sums[("api", "allowed")] == 8 and sums[("dry", "shadow_refused")] == 3


def test_a_reload_starts_the_policies_minute_again(tmp_path):
    s = start(tmp_path)
    try:
        with s.conn() as c:
            for i in range(3):
                c.call("SL.POLICY", "api", "u")
                c.call("SL.TAKE", "adhoc", 10, "1h")
        # The sampler reads the counters once a second: wait for a reading after the
        # decisions (a busy machine may delay it), as long as 10 s.
        deadline = time.monotonic() + 10
        while True:
            before = {d["policy"]: d for d in get(s, "/v1/stats").json()["decisions"]}
            if sum(before["api"]["per_second"]["allowed"]) == 3:
                break
            assert time.monotonic() < deadline, before["api"]
            time.sleep(0.2)
        write(s.config, CONFIG + "  added:\n    limit: 1\n    period: 1h\n")
        os.kill(s.proc.pid, signal.SIGHUP)
        deadline = time.monotonic() + 10
        while True:
            st = get(s, "/v1/stats").json()
            if [d["policy"] for d in st["decisions"]][-1] == "added":
                break
            assert time.monotonic() < deadline, "the reload did not happen"
            time.sleep(0.1)
        with s.conn() as c:
            c.call("SL.POLICY", "api", "u2")
        time.sleep(1.2)
        after = {d["policy"]: d for d in get(s, "/v1/stats").json()["decisions"]}
        # the ad-hoc limits' minute goes on; api's counters and seconds start again
        assert sum(after[None]["per_second"]["allowed"]) == 3
        assert len(after[None]["per_second"]["allowed"]) > len(after["api"]["per_second"]["allowed"])
        assert after["api"]["allowed"] == 1
        assert sum(after["api"]["per_second"]["allowed"]) <= 1
    finally:
        s.stop()


def test_stats_bad_requests(ui):
    r = get(ui, "/v1/stats?x=1")
    assert r.status_code == 400 and "no parameters" in r.json()["error"], r.text
    for path in ("/v1/stats", "/ui", "/v1/simulate?limit=1&period=1"):
        r = requests.post(ui.url + path, headers=BEARER, timeout=10)
        assert r.status_code == 405 and r.headers["Allow"] == "GET, HEAD", (path, r.text)
    r = requests.head(ui.url + "/v1/stats", headers=BEARER, timeout=10)
    assert r.status_code == 200 and r.content == b""
    assert int(r.headers["Content-Length"]) > 100
    assert get(ui, "/ui/").status_code == 404


# ---- the token: Bearer everywhere, Basic on the page's GETs ----

def test_auth(ui):
    for path in ("/ui", "/v1/stats", "/v1/simulate?limit=5&period=1s"):
        r = get(ui, path, headers={})
        assert r.status_code == 401, path
        assert r.json()["field"] == "authorization"
        assert "password of HTTP Basic" in r.json()["error"]
        for h in (BEARER, BASIC, {"Authorization": basic("", TOKEN)},
                  {"Authorization": "basic   " + basic("u", TOKEN)[6:]}):
            assert get(ui, path, headers=h).status_code == 200, (path, h)
        for bad in (basic("operator", "wrong"), basic("operator", TOKEN + "x"),
                    "Basic " + base64.b64encode(TOKEN.encode()).decode(),  # no user:
                    "Basic !!!!", "Bearer wrong", "Digest " + TOKEN):
            assert get(ui, path, headers={"Authorization": bad}).status_code == 401, (path, bad)
    # a browser is asked for Basic credentials on the page; an API client for a bearer token
    assert get(ui, "/ui", headers={}).headers["WWW-Authenticate"] == \
        'Basic realm="sluice", charset="UTF-8"'
    assert get(ui, "/v1/stats", headers={}).headers["WWW-Authenticate"] == 'Bearer realm="sluice"'
    # Basic opens nothing else: not the other paths, not another method
    for path in ("/metrics", "/v1/policies", "/v1/check?key=a&limit=1&period=1"):
        assert get(ui, path, headers=BASIC).status_code == 401, path
    r = requests.post(ui.url + "/v1/stats", headers=BASIC, timeout=10)
    assert r.status_code == 401, r.text
    # /v1/top (the top keys, served by a sibling of this page) passes with Basic: served,
    # or an unknown path, but not refused
    assert get(ui, "/v1/top", headers=BASIC).status_code != 401
    assert get(ui, "/v1/top", headers={}).status_code == 401
    # the page's icon, which a browser asks for at /favicon.ico whatever the page says: a
    # 401 there would make it forget the credentials it signed in with
    r = get(ui, "/favicon.ico", headers=BASIC)
    assert r.status_code == 200 and r.headers["Content-Type"] == "image/svg+xml"
    assert ET.fromstring(r.content).tag == "{http://www.w3.org/2000/svg}svg"
    assert get(ui, "/favicon.ico", headers={}).status_code == 401


# ---- the page without JavaScript ----

class Tables(html.parser.HTMLParser):
    """Every table's body rows: {table id: [{"attrs": tr's, "th": text, "cells": {data-f:
    (data-v, text)}}]}, and the page's scripts."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.tables, self.scripts = {}, []
        self.table = self.row = self.cell = None
        self.in_tbody = False
        self.text = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "script":
            self.scripts.append(a)
        if tag == "table":  # the top keys' tables: top_refused, top_admitted
            name = a.get("id") or ("top_" + a["data-kind"] if "data-kind" in a else None)
            self.table = self.tables.setdefault(name, [])
        elif tag == "tbody":
            self.in_tbody = True
        elif tag == "tr" and self.in_tbody:
            self.row = {"attrs": a, "th": "", "cells": {}}
            self.table.append(self.row)
        elif tag in ("th", "td") and self.row is not None:
            self.cell = (tag, a)
            self.text = ""

    def handle_endtag(self, tag):
        if tag in ("th", "td") and self.cell is not None:
            kind, a = self.cell
            if kind == "th":
                self.row["th"] = self.text
            else:
                self.row["cells"][a.get("data-f")] = (a.get("data-v"), self.text,
                                                      a.get("data-max"))
            self.cell = None
        elif tag == "tr":
            self.row = None
        elif tag == "tbody":
            self.in_tbody = False

    def handle_data(self, data):
        if self.cell is not None:
            self.text += data


def digits(text):
    return int(re.sub(r"[^0-9]", "", text))


def micros_text(us):
    """A percentile as the page words it: an upper bound, or past the last bound."""
    def fmt(u):
        if u < 1000:
            return "%d \u00b5s" % u
        return ("%g ms" % (u / 1e3)) if u < 1000000 else ("%g s" % (u / 1e6))
    return "\u2014" if us == 0 else "> 100 ms" if us < 0 else "\u2264 " + fmt(us)


def page_as_stats(tables):
    """The page's tables in /v1/stats's shape, for check_against_metrics; the shown text of
    every count equals its data-v."""
    for rows in tables.values():
        for r in rows:
            for f, (v, text, _) in r["cells"].items():
                if f in ("p50", "p90", "p99", "p999"):
                    assert text == micros_text(int(v)), (f, v, text)
                elif v is not None and re.fullmatch(r"\d+", v) and f != "bytes":
                    assert digits(text) == int(v), (f, v, text)
    decisions = []
    for r in tables["decisions"]:
        d = {o: int(r["cells"][o][0]) for o in OUTCOMES}
        d["policy"] = r["attrs"]["data-policy"] or None
        d["fallback"] = {"fail_open": 0, "fail_closed": 0, "local": 0}
        decisions.append(d)
    store = {f: c for r in tables["store"] for f, c in r["cells"].items()}
    return {"decisions": decisions,
            "store": {"keys": int(store["keys"][0]), "bytes": int(store["bytes"][0]),
                      "max_bytes": int(store["bytes"][2]),
                      "evictions": int(store["evictions"][0]),
                      "reclaimed": int(store["reclaimed"][0]), "errors": int(store["errors"][0])}}


def test_page_without_javascript_shows_the_numbers_of_metrics(ui):
    r = get(ui, "/ui")
    assert r.status_code == 200
    assert r.headers["Content-Type"] == "text/html; charset=utf-8"
    assert r.headers["Cache-Control"] == "no-store"
    p = Tables()
    p.feed(r.text)
    m = metrics(ui)
    check_against_metrics(page_as_stats(p.tables), m)
    assert [r["th"] for r in p.tables["decisions"]] == ["ad hoc", "api", EVIL, "dry shadow"]
    lat = {row["attrs"]["data-proto"]: row["cells"] for row in p.tables["latency"]}
    assert int(lat["resp"]["count"][0]) == metric(m, "sluice_request_duration_seconds_count",
                                                  proto="resp")
    for q, permille in (("p50", 500), ("p90", 900), ("p99", 990), ("p999", 999)):
        assert int(lat["resp"][q][0]) == quantile_us(m, "resp", permille), q
        assert lat["resp"][q][1].startswith(("\u2264 ", "> ")), lat["resp"][q]
    assert lat["grpc"]["p50"] == ("0", "\u2014", None)
    backend = {f: c for row in p.tables["backend"] for f, c in row["cells"].items()}
    assert backend["state"][0] == "up" and backend["store"][1] == "memory (in this process)"
    assert "adaptive" not in p.tables or p.tables["adaptive"] == []
    assert 'id="adaptive-card" hidden' in r.text
    # the top keys, as /v1/top gives them
    for kind in ("refused", "admitted"):
        top = get(ui, "/v1/top?kind=" + kind).json()
        rows = p.tables["top_" + kind]
        assert len(rows) == len(top["keys"]) > 0, (rows, top)
        for row, k in zip(rows, top["keys"]):
            c = row["cells"]
            assert c["policy"][1] == (k["policy"] or "ad hoc")
            assert c["key"][1] == k["key"]
            assert int(c["count"][0]) == k["count"] and digits(c["count"][1]) == k["count"]
            assert c["remaining"][0] == ("" if k["remaining"] is None else str(k["remaining"]))
    assert EVIL_KEY in [row["cells"]["key"][1] for row in p.tables["top_admitted"]]


def test_page_escapes_every_name_and_runs_only_its_own_script(ui):
    r = get(ui, "/ui")
    text = r.text
    assert "<script>alert" not in text
    esc = "&lt;script&gt;alert(1)&lt;/script&gt; &amp; &quot;q&quot; &#39;s"
    p = Tables()
    p.feed(text)
    # in the decisions row's data-policy and header cell, and in each of its top keys' rows
    # (the policy cell's title and text)
    top_rows = sum(1 for kind in ("top_refused", "top_admitted") for row in p.tables[kind]
                   if row["cells"]["policy"][1] == EVIL)
    assert top_rows >= 1
    assert text.count(esc) == 2 + 2 * top_rows
    # a key is text too: in its cell's title and text
    assert "<u>" not in text and text.count("&lt;u&gt;k&lt;/u&gt; &amp; &quot;q&quot;") == 2
    assert [r["attrs"]["data-policy"] for r in p.tables["decisions"]] == ["", "api", EVIL, "dry"]
    # one script, the page's own, under the nonce of this response's policy
    assert len(p.scripts) == 1
    csp = r.headers["Content-Security-Policy"]
    nonce = re.search(r"script-src 'nonce-([0-9a-f]{32})'", csp).group(1)
    assert p.scripts[0]["nonce"] == nonce
    assert "default-src 'none'" in csp and "connect-src 'self'" in csp
    assert re.search(r"style-src 'nonce-%s'" % nonce, csp)
    # a new nonce for each response
    assert re.search(r"nonce-([0-9a-f]{32})", get(ui, "/ui").headers[
        "Content-Security-Policy"]).group(1) != nonce
    # the JSON is JSON: the name as it is
    assert EVIL in [d["policy"] for d in get(ui, "/v1/stats").json()["decisions"]]


# ---- try a limit ----

def simulate(s, headers=BEARER, **q):
    return requests.get(s.url + "/v1/simulate", params=q, headers=headers, timeout=60)


def test_simulate_answers_the_plot(ui):
    seen = set()
    for alg in ALGORITHMS:
        for kind in TRAFFIC:
            r = simulate(ui, algorithm=alg, limit=10, period="1s", burst=4, traffic=kind)
            assert r.status_code == 200, (alg, kind, r.text)
            assert r.headers["Content-Type"] == "image/svg+xml"
            root = ET.fromstring(r.content)
            assert root.tag == "{http://www.w3.org/2000/svg}svg"
            assert root.get("width") == "960"
            series = root.findall(".//{http://www.w3.org/2000/svg}g[@class='series']")
            assert [g.get("data-algorithm") for g in series] == [alg]
            title = root.find("{http://www.w3.org/2000/svg}title").text
            assert title.startswith("sluice simulate: 10 per 1s (burst 4), traffic %s" % kind)
            n = int(re.search(r", (\d+) requests$", title).group(1))
            sub = "".join(series[0].itertext())
            adm, rej = map(int, re.search(r"admitted (\d+), rejected (\d+)", sub).groups())
            assert adm + rej == n and n > 0
            seen.add(r.content)
    assert len(seen) == len(ALGORITHMS) * len(TRAFFIC)
    # the same query, the same bytes; another seed, another poisson traffic
    a = simulate(ui, limit=20, period="2s", traffic="poisson", seed=7).content
    assert simulate(ui, limit=20, period="2s", traffic="poisson", seed=7).content == a
    assert simulate(ui, limit=20, period="2s", traffic="poisson", seed=8).content != a
    # blank fields of a form are not given
    r = requests.get(ui.url + "/v1/simulate?algorithm=gcra&limit=20&period=2s&burst=&traffic="
                     "poisson&rate=&duration=&seed=7", headers=BEARER, timeout=60)
    assert r.content == a
    # a rate and a duration: 15 per second for 4 seconds of steady traffic is 60 requests
    r = simulate(ui, limit=10, period="1s", traffic="steady", rate="15", duration="4s")
    assert "traffic steady at 15 per second, 60 requests" in r.text


@pytest.mark.parametrize("query, field, words", [
    ({"period": "1s"}, "limit", "limit is required"),
    ({"limit": 5}, "period", "period is required"),
    ({"limit": 0, "period": "1s"}, "limit", "positive integer"),
    ({"limit": "x", "period": "1s"}, "limit", "positive integer"),
    ({"limit": 5, "period": "1mo"}, "period", "not a duration"),
    ({"limit": 5, "period": "0"}, "period", "positive duration"),
    ({"limit": 5, "period": "1s", "burst": 0}, "burst", "positive integer"),
    ({"limit": 5, "period": "1s", "algorithm": "concurrency"}, "algorithm", "must be gcra"),
    ({"limit": 5, "period": "1s", "traffic": "trace.txt"}, "traffic", "must be steady"),
    ({"limit": 5, "period": "1s", "rate": "-1"}, "rate", "positive decimal"),
    ({"limit": 5, "period": "1s", "rate": "1e3"}, "rate", "positive decimal"),
    ({"limit": 5, "period": "1s", "rate": "2000000000"}, "rate", "at most 1000000000"),
    ({"limit": 5, "period": "1s", "duration": "2d"}, "duration", "at most 1d (86400 s)"),
    ({"limit": 5, "period": "1s", "duration": "86401"}, "duration", "at most 1d (86400 s)"),
    ({"limit": 5, "period": "1s", "seed": "-1"}, "seed", "non-negative integer"),
    ({"limit": 100000, "period": "1s"}, "rate", "at most 100000"),
    ({"limit": 10, "period": "1s", "rate": "1001", "duration": "100s"}, "duration",
     "about 100100 requests: the server simulates at most 100000"),
    ({"limit": 50, "period": "1s", "traffic": "boundary", "duration": "1h"}, "duration",
     "lower the limit or the duration"),
    ({"limit": 100000000, "period": "1s", "algorithm": "sliding_log", "rate": "1",
      "duration": "1s"}, "limit", "sliding_log with limit 100000000 per 1s"),
    ({"limit": 5, "period": "1s", "limit2": 1}, None, "unknown parameter 'limit2'"),
    ({"limit": 5, "period": "1s", "duration": "x" * 40}, "duration", "longer than 32 bytes"),
])
def test_simulate_refuses_beyond_its_bounds(ui, query, field, words):
    r = simulate(ui, **query)
    assert r.status_code == 400, r.text
    body = r.json()
    assert body.get("field") == field, body
    assert words in body["error"], body


def test_simulate_at_its_bounds_is_served(ui):
    # 100 000 requests exactly, and a day
    r = simulate(ui, limit=10, period="1s", traffic="steady", rate="100", duration="1000s")
    assert r.status_code == 200 and ", 100000 requests" in r.text
    r = simulate(ui, limit=1, period="1h", traffic="steady", rate="0.5", duration="1d")
    assert r.status_code == 200 and ", 43200 requests" in r.text
    r = requests.get(ui.url + "/v1/simulate?limit=5&period=1s&duration=1s&limit=6",
                     headers=BEARER, timeout=10)
    assert r.status_code == 400 and r.json()["error"] == "limit is given twice"


def raw_get(s, path, token=TOKEN):
    sock = socket.create_connection(("127.0.0.1", s.http), timeout=30)
    sock.sendall(("GET %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n\r\n"
                  % (path, token)).encode())
    return sock


_pending = {}  # socket -> bytes read past the response returned


def read_response(sock):
    """The next whole response on a socket (b"" when it closed before one), keeping what
    follows it (pipelined responses) for the next call."""
    data = _pending.pop(sock, b"")
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            return data
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    n = int(re.search(rb"Content-Length: (\d+)", head).group(1))
    while len(body) < n:
        chunk = sock.recv(65536)
        if not chunk:
            break
        body += chunk
    _pending[sock] = body[n:]
    return head + b"\r\n\r\n" + body[:n]


def test_simulations_run_off_the_workers_two_at_once(tmp_path, monkeypatch):
    s = start(tmp_path, extra=["--threads", "1"], env={"SLUICED_DEBUG_SIM_HOLD_MS": "3000"},
              monkeypatch=monkeypatch)
    try:
        q = "/v1/simulate?limit=10&period=1s"
        first, second = raw_get(s, q), raw_get(s, q)
        time.sleep(0.6)  # both taken by the worker and on the threadpool
        third = raw_get(s, q)
        busy = read_response(third).decode()
        assert busy.startswith("HTTP/1.1 503"), busy
        assert "Retry-After: 1\r\n" in busy and "2 simulations are running" in busy
        # The one worker serves on while both simulations are held: its answers come
        # before either simulation's.
        with s.conn() as c:
            assert c.call("PING") == "PONG"
        r = get(s, "/v1/stats")
        assert r.status_code == 200
        first.settimeout(0.05)
        with pytest.raises(socket.timeout):
            first.recv(1)  # still running
        first.settimeout(30)
        for sock in (first, second):
            resp = read_response(sock).decode()
            assert resp.startswith("HTTP/1.1 200") and "<svg" in resp, resp[:300]
            sock.close()
        third.close()
        # the cap is of those running: free again now
        r = simulate(s, limit=10, period="1s")
        assert r.status_code == 200
    finally:
        s.stop()


def test_a_shutdown_waits_for_a_simulation_in_flight(tmp_path, monkeypatch):
    s = start(tmp_path, env={"SLUICED_DEBUG_SIM_HOLD_MS": "1000"}, monkeypatch=monkeypatch)
    sock = raw_get(s, "/v1/simulate?limit=10&period=1s")
    time.sleep(0.2)
    s.stop()  # exit status 0, no sanitizer report: the slot and the job freed
    resp = read_response(sock)
    assert resp == b"" or resp.startswith(b"HTTP/1.1 200"), resp[:200]
    sock.close()


def test_pipelined_requests_keep_their_order_around_a_simulation(ui):
    sock = socket.create_connection(("127.0.0.1", ui.http), timeout=30)
    req = ("GET %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + TOKEN + "\r\n\r\n")
    sock.sendall((req % "/v1/simulate?limit=10&period=1s" + req % "/healthz"
                  + req % "/v1/simulate?limit=10&period=1s&traffic=bad").encode())
    first = read_response(sock)
    assert first.startswith(b"HTTP/1.1 200") and b"<svg" in first
    second = read_response(sock)
    assert second.startswith(b"HTTP/1.1 200") and second.endswith(b'{"status":"ok"}\n')
    third = read_response(sock)
    assert third.startswith(b"HTTP/1.1 400") and b'"field":"traffic"' in third
    sock.close()


# ---- the page in a real browser ----

class Load:
    """A thread taking from a few keys over RESP until paused: api's keys (5 an hour:
    most refused), one key named like a script, the evil policy, the shadow policy,
    and ad-hoc limits."""

    def __init__(self, s):
        self.s = s
        self.run = threading.Event()
        self.paused = threading.Event()
        self.stop = False
        self.n = 0
        self.t = threading.Thread(target=self.loop, daemon=True)

    def loop(self):
        with self.s.conn() as c:
            i = 0
            while not self.stop:
                if not self.run.is_set():
                    self.paused.set()
                    self.run.wait(0.05)
                    continue
                self.paused.clear()
                i += 1
                c.call("SL.POLICY", "api", "user:%d" % (i % 3))
                if i % 3 == 0:
                    c.call("SL.POLICY", "api", "<script>alert(2)</script>")
                if i % 4 == 0:
                    c.call("SL.POLICY", EVIL, "k%d" % (i % 2))
                if i % 5 == 0:
                    c.call("SL.POLICY", "dry", "d")
                if i % 2 == 0:
                    c.call("SL.TAKE", "adhoc:%d" % (i % 4), 30, "1h")
                self.n += 1
                time.sleep(0.004)
        self.paused.set()

    def start(self):
        self.run.set()
        self.t.start()

    def pause(self):
        self.run.clear()
        self.paused.clear()
        assert self.paused.wait(10)

    def close(self):
        self.stop = True
        self.run.set()
        self.t.join(10)


# What the test reads of the rendered page: every table row's cells, the charts, the top
# keys, the scripts.
READ_DOM = r"""
(() => {
  const rows = id => Array.from(document.querySelectorAll('#' + id + ' tbody tr')).map(tr => ({
    attrs: Object.fromEntries(Array.from(tr.attributes).map(a => [a.name, a.value])),
    th: tr.querySelector('th') ? tr.querySelector('th').textContent : '',
    cells: Object.fromEntries(Array.from(tr.querySelectorAll('td')).map(
      td => [td.dataset.f, [td.dataset.v === undefined ? null : td.dataset.v, td.textContent,
                            td.dataset.max === undefined ? null : td.dataset.max]]))
  }));
  const top = kind => {
    const t = document.querySelector('#top-' + kind + ' table');
    if (!t) return document.getElementById('top-' + kind).textContent;
    return Array.from(t.tBodies[0].rows).map(tr => ({
      policy: tr.cells[0].textContent, key: tr.cells[1].textContent,
      count: tr.cells[2].dataset.v, count_text: tr.cells[2].textContent,
      remaining: tr.cells[3].dataset.v}));
  };
  const tables = {};
  for (const id of ['decisions', 'store', 'latency', 'backend', 'adaptive']) tables[id] = rows(id);
  return {
    updated: Number(document.body.dataset.updated),
    status: document.getElementById('status').textContent,
    tables: tables,
    adaptive_hidden: document.getElementById('adaptive-card').hidden,
    charts: Array.from(document.querySelectorAll('#charts .chart')).map(c => ({
      title: c.querySelector('h3').textContent,
      lines: Array.from(c.querySelectorAll('polyline')).map(p => p.getAttribute('class')),
      points: Array.from(c.querySelectorAll('polyline')).map(
        p => p.getAttribute('points').split(' ').length)})),
    top_refused: top('refused'), top_admitted: top('admitted'),
    scripts: document.scripts.length,
    script_text: Array.from(document.querySelectorAll('td, th, h3')).filter(
      e => e.querySelector('script')).length
  };
})()
"""


def page_top_matches(shown, top):
    """The page's rows of a top-keys table against /v1/top's keys."""
    assert isinstance(shown, list), shown
    assert len(shown) == len(top["keys"])
    for row, k in zip(shown, top["keys"]):
        assert row["policy"] == (k["policy"] if k["policy"] else "ad hoc")
        assert row["key"] == k["key"]
        assert int(row["count"]) == k["count"]
        # Shown as the range the true count is in, and marked as an estimate when sampled.
        low = k["count"] - k["error"]
        text = (str(k["count"]) if not k["error"] else "%d\u2013%d" % (low, k["count"]))
        if k.get("sample"):
            text = "\u2248\u00a0" + text
        assert row["count_text"].replace("\u202f", "") == text, (row, k)
        assert row["remaining"] == ("" if k["remaining"] is None else str(k["remaining"]))


def test_the_page_in_chromium(tmp_path):
    from cdp import Browser, CDPError  # python3-websocket (scripts/deps.sh)
    s = start(tmp_path)
    load = Load(s)
    try:
        load.start()
        with Browser() as b:
            page = b.new_page()
            page.basic_auth("operator", TOKEN)
            page.navigate(s.url + "/ui")
            # the page updates itself: the script replaced the server's first rendering
            page.wait_for("Number(document.body.dataset.updated) > 0", what="a first update")
            time.sleep(2.5)  # a few seconds of charts
            load.pause()
            assert load.n > 50, "the load ran"
            t0 = get(s, "/v1/stats").json()["unix_ms"]
            page.wait_for("Number(document.body.dataset.updated) > %d" % t0,
                          what="an update after the pause")
            dom = page.eval(READ_DOM)
            m = metrics(s)
            st = get(s, "/v1/stats").json()
            top = {k: get(s, "/v1/top?kind=%s&count=10" % k) for k in ("refused", "admitted")}

            assert dom["status"].startswith("updated"), dom["status"]
            # the numbers shown are those of /metrics and /v1/stats
            shown = page_as_stats(dom["tables"])
            check_against_metrics(shown, m)
            check_against_metrics(st, m)
            by = {d["policy"]: d for d in shown["decisions"]}
            assert by["api"]["refused"] > 0 and by["dry"]["shadow_refused"] > 0
            assert by[None]["allowed"] > 0
            lat = {r["attrs"]["data-proto"]: r["cells"] for r in dom["tables"]["latency"]}
            assert int(lat["resp"]["count"][0]) == metric(
                m, "sluice_request_duration_seconds_count", proto="resp")
            for q, permille in (("p50", 500), ("p90", 900), ("p99", 990), ("p999", 999)):
                assert int(lat["resp"][q][0]) == quantile_us(m, "resp", permille), q
            backend = {f: c for r in dom["tables"]["backend"] for f, c in r["cells"].items()}
            assert backend["state"][:2] == ["up", "up"]
            assert dom["adaptive_hidden"] is True

            # a chart per policy (and ad hoc, which has decisions), the names as text
            titles = [c["title"] for c in dom["charts"]]
            assert titles == ["ad hoc", "api", EVIL, "dry"], titles
            for c in dom["charts"]:
                assert "s-allowed" in c["lines"] and "s-refused" in c["lines"]
                assert all(n >= 3 for n in c["points"]), c
            dry = [c for c in dom["charts"] if c["title"] == "dry"][0]
            assert "s-shadow_refused" in dry["lines"]
            # nothing became markup: one script, and no element holds a script
            assert dom["scripts"] == 1 and dom["script_text"] == 0
            assert [r["th"] for r in dom["tables"]["decisions"]] == \
                ["ad hoc", "api", EVIL, "dry shadow"]

            # the top keys: as /v1/top says them when it is served
            for kind in ("refused", "admitted"):
                r = top[kind]
                if r.status_code == 200:
                    page_top_matches(dom["top_" + kind], r.json())
                else:
                    assert r.status_code == 404, r.text
                    assert dom["top_" + kind] == "top keys: not available", dom["top_" + kind]
            if top["refused"].status_code == 200:
                keys = [row["key"] for row in dom["top_refused"]]
                assert "<script>alert(2)</script>" in keys, keys

            # try a limit: the plot in the page, then an error naming its field
            page.eval("""(() => { const f = document.getElementById('sim');
                f.elements.algorithm.value = 'sliding_window'; f.elements.limit.value = '20';
                f.elements.period.value = '2s'; f.elements.traffic.value = 'boundary';
                f.requestSubmit(); })()""")
            page.wait_for("(() => { const i = document.querySelector('#sim-plot img');"
                          " return i && i.complete && i.naturalWidth > 0; })()",
                          what="the plot")
            assert page.eval("document.querySelector('#sim-plot img').naturalWidth") == 960
            assert page.eval("document.getElementById('sim-error').textContent") == ""

            # the screenshots: a laptop's width, a phone's
            laptop = page.screenshot(os.path.join(ARTIFACTS, "laptop.png"), width=1280)
            phone = page.screenshot(os.path.join(ARTIFACTS, "phone.png"), width=390,
                                    mobile=True, scale=2)
            for path in (laptop, phone):
                with open(path, "rb") as f:
                    assert f.read(8) == b"\x89PNG\r\n\x1a\n", path
            # on a phone the page is no wider than the screen
            assert page.eval("document.documentElement.scrollWidth") <= 390

            page.eval("""(() => { const f = document.getElementById('sim');
                f.elements.duration.value = '2d'; f.requestSubmit(); })()""")
            page.wait_for("document.getElementById('sim-error').textContent !== ''",
                          what="the error")
            assert "at most 1d" in page.eval("document.getElementById('sim-error').textContent")
            assert page.eval("document.getElementById('sim').elements.duration"
                             ".classList.contains('bad')") is True
    except CDPError as e:
        pytest.fail("chromium: %s" % e)
    finally:
        load.close()
        s.stop()


def test_the_page_shows_ranges_and_estimates(tmp_path):
    """Top keys whose counts are not exact: 4 counters a kind for hundreds of keys (each
    count then a range, count - error to count) and a rate above --top-exact-rate (counts
    sampled: marked as estimates). The page shows each row as /v1/top gives it, and says
    which is which."""
    from cdp import Browser, CDPError  # python3-websocket (scripts/deps.sh)
    import random
    s = start(tmp_path, ["--top-keys", "4", "--top-exact-rate", "2000", "--threads", "1"])
    rng = random.Random(11)
    try:
        with s.conn(timeout=60) as c:
            for _ in range(10):
                cmds = [("CL.THROTTLE", "hot" if rng.random() < 0.3 else "k:%d" % rng.randrange(500),
                         0, 1, 3600) for _ in range(2000)]
                assert all(isinstance(r, list) for r in pipeline(c, cmds))
        top = get(s, "/v1/top?kind=refused").json()
        assert top.get("keys") and top["keys"][0]["key"] == "hot", top
        assert any(k["error"] > 0 for k in top["keys"]), top
        assert any(k.get("sample", 1) > 1 for k in top["keys"]), top
        # as the server writes the page (no script)
        p = Tables()
        p.feed(get(s, "/ui").text)
        shown = [{"policy": r["cells"]["policy"][1], "key": r["cells"]["key"][1],
                  "count": r["cells"]["count"][0], "count_text": r["cells"]["count"][1],
                  "remaining": r["cells"]["remaining"][0]} for r in p.tables["top_refused"]]
        page_top_matches(shown, top)
        with Browser() as b:
            page = b.new_page()
            page.basic_auth("operator", TOKEN)
            page.navigate(s.url + "/ui")
            page.wait_for("document.querySelector('#top-refused table') !== null",
                          what="the top keys")
            dom = page.eval(READ_DOM)
            page_top_matches(dom["top_refused"], top)
            title = page.eval("document.querySelector('#top-refused td[data-f=count]').title")
            assert "estimated from 1 in" in title, title
    except CDPError as e:
        pytest.fail("chromium: %s" % e)
    finally:
        s.stop()
