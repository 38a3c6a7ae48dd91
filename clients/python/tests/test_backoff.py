"""Backoff over many draws with a fixed seed: the bounds hold on every draw, the spread is
that of the distribution (figures printed), Retry-After is always respected, and the
deadline gives up."""

import random
import statistics

import pytest

from sluice_client import Backoff

DRAWS = 20000


def test_full_jitter_bounds_and_mean():
    b = Backoff(base=0.1, cap=3.0, deadline=None, rng=random.Random(1))
    for attempt in range(8):
        ceiling = min(3.0, 0.1 * 2 ** attempt)
        draws = [b.delay(attempt) for _ in range(DRAWS)]
        assert all(0 <= d <= ceiling for d in draws)
        mean = statistics.fmean(draws)
        print("full jitter attempt %d: ceiling %.2f mean %.4f min %.4f max %.4f"
              % (attempt, ceiling, mean, min(draws), max(draws)))
        # uniform(0, c): mean c/2, standard error c/sqrt(12 n) (~0.2% of c here)
        assert abs(mean - ceiling / 2) < 0.02 * ceiling
        # each tenth of [0, c] gets about a tenth of the draws
        deciles = [0] * 10
        for d in draws:
            deciles[min(9, int(d / ceiling * 10))] += 1
        assert all(abs(n - DRAWS / 10) < DRAWS / 10 * 0.1 for n in deciles), deciles


def test_decorrelated_bounds():
    b = Backoff(base=0.05, cap=2.0, deadline=None, decorrelated=True, rng=random.Random(2))
    prev, draws = None, []
    for _ in range(DRAWS):
        d = b.delay(0, previous=prev)
        lo, hi = 0.05, min(2.0, 3 * (0.05 if prev is None else max(0.05, prev)))
        assert lo <= d <= hi
        draws.append(d)
        prev = d
    print("decorrelated: mean %.4f min %.4f max %.4f" % (statistics.fmean(draws), min(draws), max(draws)))
    assert max(draws) > 1.5  # it does climb towards the cap


@pytest.mark.parametrize("decorrelated", [False, True])
def test_retry_after_is_always_respected(decorrelated):
    rng = random.Random(3)
    b = Backoff(base=0.01, cap=0.5, deadline=None, decorrelated=decorrelated, rng=random.Random(4))
    for i in range(DRAWS):
        ra = rng.choice([0.0, 0.001, 0.3, 1.0, 7.5, rng.uniform(0, 10)])
        d = b.delay(i % 12, retry_after=ra)
        assert d >= ra  # above the cap when the server says so


def test_attempts_far_out_do_not_overflow():
    b = Backoff(base=0.1, cap=1.0, deadline=None, rng=random.Random(5))
    assert 0 <= b.delay(10**6) <= 1.0


def test_schedule_gives_up_at_the_deadline():
    t = [0.0]
    b = Backoff(base=0.5, cap=0.5, deadline=2.0, rng=random.Random(6), clock=lambda: t[0])
    s = b.schedule()
    slept = 0.0
    while True:
        d = s.next(now=t[0])
        if d is None:
            break
        t[0] += d
        slept += d
    assert slept <= 2.0
    assert s.attempt >= 4  # full jitter of at most 0.5 s: at least four fit in 2 s
    # a Retry-After past the deadline gives up at once
    s2 = b.schedule(start=0.0)
    assert s2.next(retry_after=2.5, now=0.0) is None
    assert s2.next(retry_after=1.5, now=0.0) == 1.5


def test_same_seed_same_delays():
    a = Backoff(rng=random.Random(9))
    b = Backoff(rng=random.Random(9))
    assert [a.delay(i) for i in range(20)] == [b.delay(i) for i in range(20)]


@pytest.mark.parametrize("kw", [dict(base=0), dict(base=1, cap=0.5), dict(deadline=-1)])
def test_bad_parameters(kw):
    with pytest.raises(ValueError):
        Backoff(**kw)
