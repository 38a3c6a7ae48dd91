"""`sluice simulate`: the guarantees of docs/algorithms.md, checked on its output."""

import csv
import math
import os
import xml.etree.ElementTree as ET
from fractions import Fraction

import pytest

from conftest import parse_table, run

ALL = ["gcra", "token_bucket", "leaky_bucket", "fixed_window", "sliding_log", "sliding_window"]
KINDS = ["steady", "bursty", "poisson", "boundary", "ramp"]
SVG_NS = "{http://www.w3.org/2000/svg}"


def simulate(*args):
    return parse_table(run("simulate", *args, check=0).stdout)


@pytest.mark.parametrize("limit,period", [(100, "1s"), (7, "1s"), (10, "1m"), (1000, "250ms")])
def test_boundary_fixed_window_lets_through_about_twice(limit, period):
    t = simulate("--limit", limit, "--period", period, "--traffic", "boundary")
    fw = t["fixed_window"]["max_in_period"]
    assert fw <= 2 * limit
    assert fw > 1.9 * limit
    # The exact algorithms hold the limit on the same traffic.
    assert t["sliding_log"]["max_in_period"] <= limit
    # The counter admits nothing extra against this attacker (docs/algorithms.md).
    assert t["sliding_window"]["max_in_period"] < 2 * limit


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_sliding_log_is_exact_and_windows_bounded(kind, seed):
    for limit, period, rate in [(10, "1s", 25), (64, "2s", 50), (3, "100ms", 100)]:
        t = simulate("--limit", limit, "--period", period, "--traffic", kind, "--seed", seed,
                     "--rate", rate, "--duration", "20s")
        assert t["sliding_log"]["max_in_period"] <= limit
        assert t["fixed_window"]["max_in_period"] <= 2 * limit
        assert t["sliding_window"]["max_in_period"] < 2 * limit
        # Token bucket and GCRA are the same limiter.
        assert t["gcra"]["admitted"] == t["token_bucket"]["admitted"]
        # At most burst + limit in any period (T = period in b + r*T).
        assert t["token_bucket"]["max_in_period"] <= 2 * limit
        for name, row in t.items():
            assert row["state_bytes"] > 0
        assert t["sliding_log"]["state_bytes"] >= 8 * limit
        assert t["leaky_bucket"]["delay_p50_ms"] is not None
        assert t["leaky_bucket"]["delay_p50_ms"] <= t["leaky_bucket"]["delay_p99_ms"]


def read_events(path):
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    return rows


def check_token_bucket(times_costs, burst, limit, period_ns):
    """Over every interval [t_i, t_j]: units admitted <= burst + limit * (t_j - t_i) / period.

    With C_k the units admitted up to and including request k, the interval from
    request i to request j holds C_j - C_{i-1}; so the largest excess is, for each j,
    (C_j - r t_j) minus the smallest (C_{i-1} - r t_i) over i <= j. Exact fractions.
    """
    r = Fraction(limit, period_ns)
    best_prev = None  # min over i <= j of C_{i-1} - r*t_i
    c = 0
    worst = None
    for t, cost in times_costs:
        cand = c - r * t
        best_prev = cand if best_prev is None or cand < best_prev else best_prev
        c += cost
        excess = (c - r * t) - best_prev
        worst = excess if worst is None or excess > worst else worst
        assert excess <= burst, "%s units in an interval ending at %d ns; bound %s" % (
            excess + 0, t, burst)
    return worst


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("limit,period,burst,rate,seed", [
    (10, "1s", 10, 30, 1), (10, "1s", 3, 30, 2), (7, "700ms", 20, 40, 3), (100, "1s", 1, 150, 4)])
def test_token_bucket_bound_on_every_interval(tmp_path, kind, limit, period, burst, rate, seed):
    ev = tmp_path / "events.csv"
    run("simulate", "--limit", limit, "--period", period, "--burst", burst, "--traffic", kind,
        "--rate", rate, "--seed", seed, "--duration", "12s", "--algorithms", "token_bucket,gcra",
        "--events", ev, check=0)
    rows = read_events(ev)
    assert rows and set(rows[0]) == {"algorithm", "t_ns", "key", "cost", "allowed", "delay_ns"}
    period_ns = int(float(period[:-2]) * 1e6) if period.endswith("ms") else int(period[:-1]) * 10**9
    for alg in ("token_bucket", "gcra"):
        adm = [(int(r["t_ns"]), int(r["cost"])) for r in rows
               if r["algorithm"] == alg and r["allowed"] == "1"]
        assert adm
        check_token_bucket(adm, burst, limit, period_ns)


def test_token_bucket_bound_on_a_trace(tmp_path):
    trace = tmp_path / "t.txt"
    lines, t = [], 0
    import random
    rnd = random.Random(5)
    for _ in range(3000):
        t += rnd.choice([0, 1, 1000, 10**6, 10**7, 3 * 10**8])
        lines.append("%dns k%d %d" % (t, rnd.randrange(3), rnd.choice([1, 1, 2, 5])))
    trace.write_text("\n".join(lines) + "\n")
    ev = tmp_path / "ev.csv"
    run("simulate", "--limit", 20, "--period", "1s", "--burst", 8, "--traffic", trace,
        "--algorithms", "token_bucket", "--events", ev, check=0)
    rows = read_events(ev)
    for k in ("k0", "k1", "k2"):
        adm = [(int(r["t_ns"]), int(r["cost"])) for r in rows if r["key"] == k and r["allowed"] == "1"]
        check_token_bucket(adm, 8, 20, 10**9)


@pytest.mark.parametrize("kind", KINDS)
def test_same_seed_same_output(tmp_path, kind):
    outs = []
    for n in range(2):
        svg, csvf = tmp_path / ("a%d.svg" % n), tmp_path / ("a%d.csv" % n)
        p = run("simulate", "--limit", 50, "--period", "1s", "--traffic", kind, "--seed", 42,
                "--svg", svg, "--csv", csvf, check=0)
        outs.append((p.stdout, svg.read_bytes(), csvf.read_bytes()))
    assert outs[0] == outs[1]


def test_another_seed_other_poisson_traffic():
    a = run("simulate", "--limit", 50, "--period", "1s", "--traffic", "poisson", "--seed", 1, check=0)
    b = run("simulate", "--limit", 50, "--period", "1s", "--traffic", "poisson", "--seed", 2, check=0)
    assert a.stdout != b.stdout


@pytest.mark.parametrize("kind", KINDS)
def test_svg_parses_with_one_series_per_algorithm(tmp_path, kind):
    svg = tmp_path / "p.svg"
    run("simulate", "--limit", 20, "--period", "1s", "--traffic", kind, "--svg", svg, check=0)
    root = ET.parse(svg).getroot()
    assert root.tag == SVG_NS + "svg"
    series = [g for g in root.iter(SVG_NS + "g") if g.get("class") == "series"]
    assert [g.get("data-algorithm") for g in series] == ALL
    for g in series:
        # Admitted bars, rejected bars, the sliding count, the limit drawn twice.
        classes = [e.get("class") for e in g.iter()]
        assert "admitted" in classes and "rejected" in classes
        assert classes.count("limit") == 2
        assert any(e.tag == SVG_NS + "polyline" for e in g.iter())
    texts = " ".join(e.text or "" for e in root.iter(SVG_NS + "text"))
    assert "time (s)" in texts and "the limit" in texts
    # Self-contained: no scripts, no external references.
    raw = svg.read_text()
    assert "<script" not in raw and "href" not in raw


def test_svg_names_only_the_chosen_algorithms(tmp_path):
    svg = tmp_path / "p.svg"
    run("simulate", "--limit", 20, "--period", "1s", "--algorithms", "sliding_log,gcra",
        "--svg", svg, check=0)
    root = ET.parse(svg).getroot()
    names = [g.get("data-algorithm") for g in root.iter(SVG_NS + "g") if g.get("class") == "series"]
    assert names == ["sliding_log", "gcra"]


def test_csv_columns_and_totals(tmp_path):
    f = tmp_path / "o.csv"
    p = run("simulate", "--limit", 30, "--period", "1s", "--traffic", "bursty", "--buckets", 40,
            "--csv", f, check=0)
    t = parse_table(p.stdout)
    with open(f, newline="") as fh:
        r = csv.reader(fh)
        header = next(r)
        rows = list(r)
    assert header == ["algorithm", "bucket", "start_ns", "end_ns", "offered", "admitted",
                      "rejected", "admitted_in_period"]
    assert len(rows) == 40 * len(ALL)
    for alg in ALL:
        mine = [x for x in rows if x[0] == alg]
        assert [int(x[1]) for x in mine] == list(range(40))
        assert sum(int(x[5]) for x in mine) == t[alg]["admitted"]
        assert sum(int(x[6]) for x in mine) == t[alg]["rejected"]
        for x in mine:
            assert int(x[4]) == int(x[5]) + int(x[6])
            assert int(x[3]) > int(x[2])
            # The sliding count at a bucket's end never exceeds the max in any period.
            assert int(x[7]) <= t[alg]["max_in_period"]


def test_trace_file_with_keys_and_costs(tmp_path):
    trace = tmp_path / "trace.txt"
    trace.write_text("# a comment\n0 alice\n0.5 alice 3\n\n500ms bob\n1 alice 2\n1.2s bob 1\n"
                     "2000000000ns alice\n")
    p = run("simulate", "--limit", 3, "--period", "1s", "--traffic", trace,
            "--algorithms", "sliding_log,fixed_window", check=0)
    t = parse_table(p.stdout)
    # alice: 1 at 0 (ok), 3 at 0.5 (1+3 > 3: rejected), 2 at 1.0 (window [0,1) over: ok),
    # 1 at 2.0 (ok). bob: 1 at 0.5, 1 at 1.2: ok.
    assert t["sliding_log"]["admitted"] == 5 and t["sliding_log"]["rejected"] == 1
    assert t["sliding_log"]["max_in_period"] <= 3
    assert "6 requests" in p.stdout


@pytest.mark.parametrize("content,line,words", [
    ("1\n0.5\n", 2, "backwards"),
    ("1\nabc\n", 2, "time 'abc'"),
    ("1 k\n2 k -1\n", 2, "cost '-1'"),
    ("1 k 1 extra\n", 1, "more than 3 fields"),
    ("0\n1.0000000001\n", 2, "9 digits"),
    ("0\n" + "1" * 5000 + "\n", 2, "longer than 4096"),
    ("0\n1 k " + "9" * 30 + "\n", 2, "cost"),
    ("5parsecs\n", 1, "unknown unit"),
    ("0 " + "k" * 600 + "\n", 1, "key longer"),
])
def test_trace_file_errors_name_the_line(tmp_path, content, line, words):
    trace = tmp_path / "bad.txt"
    trace.write_text(content)
    p = run("simulate", "--limit", 3, "--period", "1s", "--traffic", trace, check=2)
    assert "bad.txt:%d:" % line in p.stderr
    assert words in p.stderr


def test_events_quote_keys_with_commas(tmp_path):
    trace = tmp_path / "t.txt"
    trace.write_text('0 a,b\n1 "q"\n2 plain 2\n')
    ev = tmp_path / "ev.csv"
    run("simulate", "--limit", 3, "--period", "1s", "--traffic", trace, "--algorithms", "gcra",
        "--events", ev, check=0)
    rows = read_events(ev)
    assert [r["key"] for r in rows] == ["a,b", '"q"', "plain"]
    assert [r["cost"] for r in rows] == ["1", "1", "2"]


def test_trace_file_missing_or_empty(tmp_path):
    p = run("simulate", "--limit", 3, "--period", "1s", "--traffic", tmp_path / "nope.txt", check=2)
    assert "nope.txt" in p.stderr
    e = tmp_path / "empty.txt"
    e.write_text("# nothing\n")
    p = run("simulate", "--limit", 3, "--period", "1s", "--traffic", e, check=2)
    assert "no requests" in p.stderr


@pytest.mark.parametrize("args,flag", [
    (["--limit", "10"], "--period"),
    (["--period", "1s"], "--limit"),
    (["--limit", "0", "--period", "1s"], "--limit"),
    (["--limit", "ten", "--period", "1s"], "--limit"),
    (["--limit", "99999999999999999999", "--period", "1s"], "--limit"),
    (["--limit", "10", "--period", "1 s"], "--period"),
    (["--limit", "10", "--period", "0"], "--period"),
    (["--limit", "10", "--period", "1fortnight"], "--period"),
    (["--limit", "10", "--period", "1s", "--burst", "-1"], "--burst"),
    (["--limit", "10", "--period", "1s", "--rate", "0"], "--rate"),
    (["--limit", "10", "--period", "1s", "--rate", "nan"], "--rate"),
    (["--limit", "10", "--period", "1s", "--duration", "x"], "--duration"),
    (["--limit", "10", "--period", "1s", "--seed", "-3"], "--seed"),
    (["--limit", "10", "--period", "1s", "--buckets", "0"], "--buckets"),
    (["--limit", "10", "--period", "1s", "--algorithms", "gcra,magic"], "--algorithms"),
    (["--limit", "10", "--period", "1s", "--algorithms", "concurrency"], "--algorithms"),
    (["--limit", "10", "--period", "1s", "--algorithms", "gcra,gcra"], "--algorithms"),
    (["--limit", "10", "--period", "1s", "--frobnicate"], "--frobnicate"),
    (["--limit", "10", "--period", "1s", "--limit", "3"], "--limit"),
    (["--limit", "10", "--period"], "--period"),
    (["--limit", "10", "--period", "1s", "extra"], "extra"),
    (["--limit", "10", "--period", "1s", "--nodes", "3"], "--strategy"),
    (["--limit", "10", "--period", "1s", "--nodes", "0", "--strategy", "sync"], "--nodes"),
    (["--limit", "10", "--period", "1s", "--nodes", "2", "--strategy", "gossip"], "--strategy"),
    (["--limit", "10", "--period", "1s", "--nodes", "2", "--strategy", "sync",
      "--sync-interval", "0"], "--sync-interval"),
    (["--limit", "100000", "--period", "1s", "--algorithms", "sliding_log"], "sliding_log"),
    (["--limit", "10", "--period", "1s", "--nodes", "2", "--strategy", "sync", "--events", "x"],
     "--events"),
    (["--limit", "10", "--period", "1s", "--nodes", "2", "--strategy", "sync",
      "--algorithms", "gcra,fixed_window"], "--algorithms"),
    (["--limit", "10", "--period", "1s", "--rate", "1e9", "--duration", "1h"], "--rate"),
    (["--limit", "10", "--period", "1s", "--nodes", "2", "--strategy", "sync",
      "--algorithms", "sliding_log"], "not a rate"),
    (["--limit", "10", "--period", "1s", "--nodes", "17", "--strategy", "sync"], "16 nodes"),
    (["--limit", "10", "--period", "1s", "--nodes", "3", "--strategy", "sync",
      "--node-weights", "1,2"], "--node-weights"),
    (["--limit", "10", "--period", "1s", "--nodes", "3", "--strategy", "sync",
      "--node-weights", "1,2,3,4"], "--node-weights"),
    (["--limit", "10", "--period", "1s", "--nodes", "3", "--strategy", "sync",
      "--node-weights", "0,0,0"], "--node-weights"),
    (["--limit", "10", "--period", "1s", "--nodes", "3", "--strategy", "sync",
      "--node-weights", "1,-2,3"], "--node-weights"),
    (["--limit", "10", "--period", "1s", "--nodes", "3", "--strategy", "sync",
      "--shift-at", "0"], "--shift-at"),
    (["--limit", "10", "--period", "1s", "--node-weights", "1,2"], "--nodes"),
    (["--limit", "10", "--period", "1h", "--rate", "0.01", "--nodes", "16", "--strategy", "all",
      "--sync-interval", "1us"], "--sync-interval"),
])
def test_bad_flags_exit_2_naming_the_flag(args, flag):
    p = run("simulate", *args, check=2)
    assert flag in p.stderr
    assert p.stdout == ""


def test_large_limit_leaves_sliding_log_out_with_a_note():
    p = run("simulate", "--limit", 100000, "--period", "10s", "--duration", "20s", check=0)
    t = parse_table(p.stdout)
    assert "sliding_log" not in t and "gcra" in t
    assert "sliding_log left out" in p.stderr


def test_unwritable_output_fails_with_1(tmp_path):
    p = run("simulate", "--limit", 10, "--period", "1s", "--svg", tmp_path / "no" / "dir.svg", check=1)
    assert "dir.svg" in p.stderr


def sync_bound(nodes, limit, burst, period_s, interval_s):
    """What the fleet may admit beyond burst + rate * span (src/algo/quota.h):
    r*3*I + (N-1)/N * (B + r*I) + N, r the rate, I the interval."""
    r = Fraction(limit) / Fraction(period_s)
    i = Fraction(interval_s)
    return r * 3 * i + Fraction(nodes - 1, nodes) * (burst + r * i) + nodes


def test_fleet_strategies():
    args = ["--limit", 100, "--period", "1s", "--traffic", "poisson", "--rate", 300, "--seed", 3]
    t = simulate(*args, "--nodes", 4, "--strategy", "all", "--sync-interval", "250ms")
    assert list(t) == ["central", "sync", "split", "route"]
    # central and route are exact per key: the same decisions as one limiter.
    one = simulate(*args, "--algorithms", "gcra")
    for s in ("central", "route"):
        assert t[s]["admitted"] == one["gcra"]["admitted"]
        assert t[s]["max_in_period"] == one["gcra"]["max_in_period"] <= 200
    # split: each node limit/4 and burst/4: the whole limit's bound holds.
    assert t["split"]["max_in_period"] <= 200
    # sync: within its stated bound in any period, and about the limit over the run.
    assert t["sync"]["max_in_period"] <= 200 + sync_bound(4, 100, 100, 1, Fraction(1, 4))
    assert abs(t["sync"]["admitted"] - t["central"]["admitted"]) <= 0.02 * t["central"]["admitted"]


def test_fleet_sync_prints_its_bound():
    p = run("simulate", "--limit", 1000, "--period", "1s", "--burst", 100, "--nodes", 3,
            "--strategy", "all", "--sync-interval", "100ms", check=0)
    want = math.ceil(sync_bound(3, 1000, 100, 1, Fraction(1, 10)))
    assert "sync's bound: in any span, at most burst + rate x span + %d units" % want in p.stdout
    p = run("simulate", "--limit", 1000, "--period", "1s", "--nodes", 3, "--strategy", "split",
            check=0)
    assert "sync's bound" not in p.stdout


def test_fleet_sync_admits_a_sparse_key_over_many_nodes():
    # Half the limit over 16 nodes: each node's share is below one unit an
    # interval; only each node's first request, before its first sync, may
    # be refused (its static share, 10/16 of a unit, is none).
    t = simulate("--limit", 10, "--period", "1s", "--rate", 5, "--duration", "60s",
                 "--nodes", 16, "--strategy", "all")
    assert t["central"]["rejected"] == 0
    assert t["sync"]["rejected"] <= 16


def test_fleet_sync_leaves_windows_out_with_a_note():
    args = ["--limit", 100, "--period", "1s", "--traffic", "steady", "--rate", 400,
            "--algorithms", "sliding_log", "--nodes", 4, "--sync-interval", "200ms"]
    p = run("simulate", *args, "--strategy", "all", check=0)
    t = parse_table(p.stdout)
    assert list(t) == ["central", "split", "route"]
    assert "sync left out: sliding_log is not a rate" in p.stderr
    assert t["central"]["max_in_period"] == t["route"]["max_in_period"] == 100
    assert t["split"]["max_in_period"] <= 100


@pytest.mark.parametrize("weights", ["60,30,10", "98,1,1", "50,50,0", "1,1,1"])
@pytest.mark.parametrize("alg", ["gcra", "token_bucket"])
def test_fleet_sync_steady_overload_keeps_the_limit_whatever_the_split(weights, alg):
    # 10x the limit for 60 s over 3 nodes syncing every 100 ms: within 2% of
    # one exact limiter, and never beyond the stated bound in a period.
    t = simulate("--limit", 1000, "--period", "1s", "--burst", 100, "--rate", 10000,
                 "--duration", "60s", "--algorithms", alg, "--nodes", 3, "--strategy", "all",
                 "--node-weights", weights)
    exact = t["central"]["admitted"]
    assert abs(t["sync"]["admitted"] - exact) <= 0.02 * exact
    assert t["sync"]["max_in_period"] <= 1100 + sync_bound(3, 1000, 100, 1, Fraction(1, 10))
    if weights == "50,50,0":
        # split enforces a third on each node: the idle node's third is lost.
        assert t["split"]["admitted"] < 0.7 * exact


def test_fleet_sync_follows_traffic_that_moves():
    # All the traffic on node 0, then from 5 s on all of it on node 1.
    args = ["--limit", 1000, "--period", "1s", "--burst", 100, "--rate", 10000,
            "--duration", "10s", "--nodes", 3, "--node-weights", "1,0,0", "--shift-at", "5s",
            "--buckets", 100]
    t = simulate(*args, "--strategy", "all")
    exact = t["central"]["admitted"]
    assert abs(t["sync"]["admitted"] - exact) <= 0.02 * exact
    assert t["sync"]["max_in_period"] <= 1100 + sync_bound(3, 1000, 100, 1, Fraction(1, 10))
    # split gives each node a third: after the move as before, a third is all it gets.
    assert t["split"]["admitted"] < 0.5 * exact


def test_fleet_sync_burst_from_idle_within_the_bound(tmp_path):
    # A trickle on every node, a pause, then the whole burst at once on each.
    trace = tmp_path / "burst.txt"
    lines = ["%dms k\n" % t for t in range(0, 1000, 50)]
    lines += ["3000ms k\n"] * 900
    lines += ["%dms k\n" % t for t in range(3001, 5000)]
    trace.write_text("".join(lines))
    t = simulate("--limit", 100, "--period", "1s", "--burst", 300, "--traffic", trace,
                 "--nodes", 3, "--strategy", "all")
    assert t["central"]["max_in_period"] <= 400
    assert t["sync"]["max_in_period"] > 300
    assert t["sync"]["max_in_period"] <= 400 + sync_bound(3, 100, 300, 1, Fraction(1, 10))


def test_fleet_route_spreads_keys(tmp_path):
    trace = tmp_path / "keys.txt"
    trace.write_text("".join("%dms user%d\n" % (i, i % 7) for i in range(0, 5000, 3)))
    t = simulate("--limit", 10, "--period", "1s", "--traffic", trace, "--nodes", 3,
                 "--strategy", "all", "--algorithms", "sliding_log")
    one = simulate("--limit", 10, "--period", "1s", "--traffic", trace, "--algorithms", "sliding_log")
    assert t["route"]["admitted"] == t["central"]["admitted"] == one["sliding_log"]["admitted"]
    assert t["route"]["max_in_period"] <= 10


@pytest.mark.parametrize("kind", KINDS)
def test_leaky_bucket_delay_within_the_queue(kind):
    # At most `burst` waiting, each served every period/limit: no admitted request
    # waits more than burst * period / limit.
    for limit, burst in [(10, 10), (10, 3), (50, 20)]:
        t = simulate("--limit", limit, "--period", "1s", "--burst", burst, "--traffic", kind,
                     "--algorithms", "leaky_bucket,gcra")
        lb = t["leaky_bucket"]
        assert lb["delay_p99_ms"] <= burst * 1000.0 / limit
        assert lb["delay_p50_ms"] <= lb["delay_p99_ms"]
        # The meter and the queue are one leaky bucket: the same admissions.
        assert lb["admitted"] == t["gcra"]["admitted"]
        # Spaced by period/limit once shaped: never more than the limit in a period.
        assert lb["max_in_period"] <= limit
