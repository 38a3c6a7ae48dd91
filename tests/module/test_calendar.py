"""The module and sluiced answer the same windows for the same command: the module's
clock is Unix time, sluiced's store runs on the monotonic clock and aligns its windows on
the wall clock through the offset it measured at start (docs/algorithms.md, Windows on
the clock). The same SL.TAKE ... ALGORITHM fixed_window (and sliding_window) on a real
redis-server with the module and on a real sluiced: reset_after agrees within a small
tolerance (the few milliseconds between the two calls), and both agree with Python's
datetime (tests/testdata/calendar_cases.py)."""

import importlib.util
import os
import shutil
import tempfile
import time
import uuid

import pytest

import calendar_cases as cc
from conftest import ROOT

TOLERANCE_MS = 250


def _sluiced_class():
    """tests/integration's Sluiced (its conftest, loaded under another name: this
    directory has a conftest of its own)."""
    path = os.path.join(ROOT, "tests", "integration", "conftest.py")
    spec = importlib.util.spec_from_file_location("sluiced_conftest", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.Sluiced


@pytest.fixture(scope="module")
def sluiced():
    workdir = tempfile.mkdtemp(prefix="sluice-calendar-")
    s = _sluiced_class()(workdir=workdir).start()
    yield s
    s.stop()
    shutil.rmtree(workdir, ignore_errors=True)


@pytest.mark.parametrize("period,offset,algorithm,spans", cc.CASES,
                         ids=["%s-%s-%s" % (p, o, a) for p, o, a, _ in cc.CASES])
def test_module_and_sluiced_answer_the_same_windows(server, sluiced, period, offset, algorithm,
                                                    spans):
    m = server.client()
    s = sluiced.redis()
    key = "cal:%s" % uuid.uuid4().hex[:8]
    argv = cc.command(key, period, offset, algorithm)
    before = time.time()
    mod = cc.as_dict(m.execute_command(*argv))
    slu = cc.as_dict(s.execute_command(*argv))
    after = time.time()
    m.close()
    s.close()
    assert mod["allowed"] == slu["allowed"] == 1
    assert mod["remaining"] == slu["remaining"] == 4
    assert abs(mod["reset_after_ms"] - slu["reset_after_ms"]) <= TOLERANCE_MS, (mod, slu)
    # and both where the calendar says
    ends = [cc.window_end(t, period, offset, spans) for t in (before, after)]
    for d in (mod, slu):
        got = d["reset_after_ms"] / 1000.0
        assert min(ends) - after - TOLERANCE_MS / 1000 <= got <= max(ends) - before + \
            TOLERANCE_MS / 1000, (period, offset, algorithm, d, ends, before)


@pytest.mark.parametrize("period,offset,algorithm,spans,day", cc.DAY_CASES,
                         ids=["%s-%s-%s-day%d" % (p, o, a, d) for p, o, a, _, d in cc.DAY_CASES])
def test_module_and_sluiced_begin_months_on_the_same_reset_day(server, sluiced, period, offset,
                                                                algorithm, spans, day):
    """SL.TAKE ... RESETDAY: the module and sluiced agree, and both agree with datetime."""
    m = server.client()
    s = sluiced.redis()
    key = "calday:%s" % uuid.uuid4().hex[:8]
    argv = cc.command(key, period, offset, algorithm, reset_day=day)
    before = time.time()
    mod = cc.as_dict(m.execute_command(*argv))
    slu = cc.as_dict(s.execute_command(*argv))
    after = time.time()
    m.close()
    s.close()
    assert mod["allowed"] == slu["allowed"] == 1
    assert mod["remaining"] == slu["remaining"] == 4
    assert abs(mod["reset_after_ms"] - slu["reset_after_ms"]) <= TOLERANCE_MS, (mod, slu)
    ends = [cc.window_end(t, period, offset, spans, day) for t in (before, after)]
    for d in (mod, slu):
        got = d["reset_after_ms"] / 1000.0
        assert min(ends) - after - TOLERANCE_MS / 1000 <= got <= max(ends) - before + \
            TOLERANCE_MS / 1000, (period, offset, algorithm, day, d, ends, before)


def test_module_policies_and_usage_reset_on_the_day(make_server, tmp_path):
    """A policy of the module's CONFIG with reset_day: SL.POLICY and SL.USAGE answer
    the cycle that ends on the day, a tier inheriting it with the offset."""
    cfg = tmp_path / "sluice.yaml"
    cfg.write_text("policies:\n"
                   "  billing:\n"
                   "    algorithm: fixed_window\n"
                   "    utc_offset: +09:00\n"
                   "    reset_day: 30\n"
                   "    limits:\n"
                   "      - {name: monthly, limit: 500, period: 1mo}\n"
                   "      - {name: daily, limit: 50, period: 1d}\n"
                   "    tiers:\n"
                   "      paid:\n"
                   "        limits: [{name: monthly, limit: 5000, period: 1mo},\n"
                   "                 {name: daily, limit: 500, period: 1d}]\n")
    r = make_server("policy", module_args=["CONFIG", str(cfg)]).client()
    key = uuid.uuid4().hex[:8]
    for tier in ([], ["TIER", "paid"]):
        before = time.time()
        assert cc.as_dict(r.execute_command("SL.POLICY", "billing", key, "COST", 3,
                                            *tier))["allowed"] == 1
        usage = [cc.as_dict(u) for u in r.execute_command("SL.USAGE", key, "POLICY", "billing",
                                                          *tier)]
        after = time.time()
        monthly = [u for u in usage if "monthly" in str(u["name"])][0]
        assert monthly["used"] == (3 if not tier else 6), monthly
        ends = [cc.window_end(t, "1mo", "+09:00", 1, 30) for t in (before, after)]
        got = monthly["reset_after_ms"] / 1000.0
        assert min(ends) - after - TOLERANCE_MS / 1000 <= got <= \
            max(ends) - before + TOLERANCE_MS / 1000, (monthly, ends, before)
    r.close()
