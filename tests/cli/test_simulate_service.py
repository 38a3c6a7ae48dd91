"""`sluice simulate --service`: the adaptive estimators on the modelled service, checked
against issue 22's targets where the estimator meets them (docs/cli.md, docs/concurrency.md)."""

import csv
import os
import re
import xml.etree.ElementTree as ET

import pytest

from conftest import run

SVG_NS = "{http://www.w3.org/2000/svg}"
ESTIMATORS = ["aimd", "vegas", "gradient2", "anchored"]
ROW = re.compile(r"^  (\d+(?:\.\d+)?)s-(\d+(?:\.\d+)?)s +(\S+)% +(\d+) +(\d+) +(\d+) +(\S+)% +(\S+) +(\S+)%$")


def parse(out):
    """{estimator: {"segments": [{from, to, load, servers, limit, in_flight, goodput, p99x,
    refused}], "follow_ms": int or None}}"""
    res, cur = {}, None
    for line in out.splitlines():
        m = re.match(r"^estimator (\w+) ", line)
        if m:
            cur = res.setdefault(m.group(1), {"segments": [], "follow_ms": None})
            continue
        m = ROW.match(line)
        if m and cur is not None:
            f, t, load, servers, limit, infl, good, p99, ref = m.groups()
            cur["segments"].append({"from": float(f), "to": float(t), "load": float(load),
                                    "servers": int(servers), "limit": int(limit),
                                    "in_flight": int(infl), "goodput": float(good),
                                    "p99x": None if p99 == "-" else float(p99),
                                    "refused": float(ref)})
            continue
        m = re.match(r"^  halving followed in (\d+) ms", line)
        if m and cur is not None:
            cur["follow_ms"] = int(m.group(1))
    return res


def service(*args):
    p = run("simulate", "--service", *args, check=0)
    return p.stdout, parse(p.stdout)


@pytest.mark.parametrize("seed", [22, 23, 24])
def test_step_run_targets(seed):
    out, r = service("--seed", seed)
    assert set(r) == set(ESTIMATORS), out
    for name in ESTIMATORS:
        segs = r[name]["segments"]
        # 50%, 100%, 300% at 40 servers, then 300% at 20 (the default halving at 20 s).
        assert [(s["load"], s["servers"]) for s in segs] == [
            (50, 40), (100, 40), (300, 40), (300, 20)], out
        assert [(s["from"], s["to"]) for s in segs] == [(0, 5), (5, 10), (10, 20), (20, 30)]
        # Unloaded, every estimator serves what is offered, near S.
        assert 45 <= segs[0]["goodput"] <= 55
        assert segs[0]["p99x"] <= 1.3
        # Past capacity in flight only waits: nothing is served faster than capacity.
        for s in segs:
            assert s["goodput"] <= 103, (name, s)
    for name in ["aimd", "anchored"]:
        heavy, halved = r[name]["segments"][2], r[name]["segments"][3]
        assert heavy["goodput"] >= 90, (name, heavy)
        assert heavy["p99x"] <= 2.0, (name, heavy)
        assert 40 <= heavy["limit"] <= 64, (name, heavy)
        assert halved["goodput"] >= 90, (name, halved)
        assert halved["limit"] <= heavy["limit"] * 2 // 3, (name, halved)
        follow = r[name]["follow_ms"]
        assert follow is not None and follow <= 1000, (name, follow)
    # Gradient2 keeps the goodput at a latency of several service times.
    g = r["gradient2"]["segments"][2]
    assert g["goodput"] >= 90
    assert g["limit"] > 80
    assert g["p99x"] > 2.0


@pytest.mark.parametrize("seed", [134, 135])
def test_modest_overload_gradient2_grows_anchored_holds(seed):
    out, r = service("--load", "50%:2s,120%:40s", "--halve-at", "never", "--estimators",
                     "gradient2,anchored", "--seed", seed)
    assert "halving" not in out
    g, a = r["gradient2"]["segments"][1], r["anchored"]["segments"][1]
    assert g["load"] == 120 and a["load"] == 120
    assert g["limit"] > 4 * 40, out
    assert 40 <= a["limit"] <= 60, out
    assert a["goodput"] >= 90
    assert a["p99x"] <= 2.0


def test_same_seed_same_bytes_another_seed_other_figures(tmp_path):
    args = ["--load", "80%:2s,200%:4s", "--capacity", "16", "--service-time", "5ms"]
    a = run("simulate", "--service", *args, "--seed", 5, "--csv", tmp_path / "a.csv",
            "--svg", tmp_path / "a.svg", check=0)
    b = run("simulate", "--service", *args, "--seed", 5, "--csv", tmp_path / "b.csv",
            "--svg", tmp_path / "b.svg", check=0)
    c = run("simulate", "--service", *args, "--seed", 6, check=0)
    assert a.stdout == b.stdout
    for ext in ("csv", "svg"):
        assert (tmp_path / ("a." + ext)).read_bytes() == (tmp_path / ("b." + ext)).read_bytes()
    assert a.stdout != c.stdout
    assert "seed 5" in a.stdout


def test_svg_is_xml_with_every_series(tmp_path):
    path = tmp_path / "s.svg"
    run("simulate", "--service", "--load", "100%:2s,300%:2s", "--svg", path, check=0)
    root = ET.parse(path).getroot()
    assert root.tag == SVG_NS + "svg"
    groups = {g.get("id"): g for g in root.iter(SVG_NS + "g") if g.get("class") == "series"}
    assert set(groups) == {"series-" + e for e in ESTIMATORS}
    for gid, g in groups.items():
        lines = {}
        for pl in g.iter(SVG_NS + "polyline"):
            lines.setdefault(pl.get("class"), []).append(pl.get("points").split())
        for cls in ("limit", "inflight", "goodput", "p99"):
            assert len(lines.get(cls, [])) == 1, (gid, cls)
            pts = lines[cls][0]
            assert len(pts) == 200, (gid, cls, len(pts))  # 400 ticks of 10 ms, 2 a point
            for xy in pts:
                x, y = map(float, xy.split(","))
                assert 0 <= x <= 960 and y >= 0
        # The dashed references: one a strip, stepping down at the halving (2/3 of 4 s).
        assert len(lines["ref"]) == 4
        assert len(lines["ref"][0]) == 4


def test_csv_series(tmp_path):
    path = tmp_path / "s.csv"
    run("simulate", "--service", "--estimators", "anchored,aimd", "--load", "300%:6s",
        "--halve-at", "3s", "--csv", path, check=0)
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0]) == ["estimator", "t_ns", "servers", "limit", "in_flight", "served",
                             "refused", "goodput_permille", "p99_ns"]
    by = {}
    for row in rows:
        by.setdefault(row["estimator"], []).append(row)
    assert list(by) == ["anchored", "aimd"]
    for name, rs in by.items():
        assert len(rs) == 300  # 600 ticks, 2 a point
        ts = [int(x["t_ns"]) for x in rs]
        assert ts == [k * 20_000_000 for k in range(300)]
        assert {int(x["servers"]) for x in rs if int(x["t_ns"]) < 3_000_000_000} == {40}
        assert {int(x["servers"]) for x in rs if int(x["t_ns"]) >= 3_000_000_000} == {20}
        # 300% always refuses some; after the halving the half capacity is served.
        assert sum(int(x["refused"]) for x in rs) > 0
        late = rs[-50:]
        assert sum(int(x["goodput_permille"]) for x in late) / len(late) >= 900
        assert all(int(x["p99_ns"]) > 0 for x in late)


@pytest.mark.parametrize("args,msg", [
    (["--capacity", "1"], "--capacity: '1' is not an integer in 2..100000"),
    (["--capacity", "many"], "--capacity: 'many' is not an integer in 2..100000"),
    (["--service-time", "0"], "--service-time: '0' is not in 1us..10s"),
    (["--service-time", "11s"], "--service-time: '11s' is not in 1us..10s"),
    (["--service-time", "10xs"], "--service-time: '10xs'"),
    (["--spread", "91%"], "--spread: '91%' is not a percentage in 0..90%"),
    (["--spread", "-5%"], "--spread: '-5%' is not a percentage in 0..90%"),
    (["--estimators", "aimd,cubic"], "--estimators: 'cubic' is not aimd, vegas, gradient2 or anchored"),
    (["--estimators", "vegas,vegas"], "--estimators: 'vegas' is named twice"),
    (["--load", "300%"], "--load: '300%' is not LOAD%:DURATION"),
    (["--load", "0.5%:5s"], "--load: '0.5%' is not a load in 1%..10000%"),
    (["--load", "20000%:5s"], "--load: '20000%' is not a load in 1%..10000%"),
    (["--load", "100%:5ms"], "--load: a step's duration '5ms' is not a whole number of 10ms"),
    (["--load", "100%:59m,100%:2m"], "--load: the steps last more than 1h"),
    (["--load", ",".join(["100%:1s"] * 17)], "--load: more than 16 steps"),
    (["--halve-at", "30s"], "--halve-at: '30s' is not within the run (0, 30s)"),
    (["--halve-at", "0"], "--halve-at: '0' is not within the run (0, 30s)"),
    (["--halve-at", "1.005s"], "--halve-at: '1.005s' is not a whole number of 10ms"),
    (["--seed", "-1"], "--seed: '-1' is not a non-negative integer"),
    (["--capacity", "100000", "--service-time", "1us"], "more than 20000000"),
    (["--limit", "10"], "unknown flag '--limit'"),
])
def test_flag_errors(args, msg):
    p = run("simulate", "--service", *args, check=2)
    assert msg in p.stderr
    assert p.stdout == ""


def test_help_and_the_rate_simulator_points_to_it():
    p = run("simulate", "--service", "--help", check=0)
    for flag in ("--capacity", "--service-time", "--spread", "--estimators", "--load",
                 "--halve-at", "--seed", "--svg", "--csv"):
        assert flag in p.stdout
    assert "--service" in run("simulate", "--help", check=0).stdout


def test_unwritable_output_is_a_failure(tmp_path):
    p = run("simulate", "--service", "--load", "100%:1s", "--svg",
            tmp_path / "no" / "such" / "dir.svg", check=1)
    assert "cannot write" in p.stderr
