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
