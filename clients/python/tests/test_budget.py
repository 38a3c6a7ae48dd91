"""The retry budget over a fake clock."""

import random
import threading

from sluice_client import RetryBudget


class Clock:
    def __init__(self):
        self.t = 1000.0

    def __call__(self):
        return self.t


def test_floor_alone():
    c = Clock()
    b = RetryBudget(ratio=0.1, period=10, min_per_second=1, clock=c)
    allowed = sum(b.try_retry() for _ in range(100))
    assert allowed == 10  # min_per_second * period, no first attempts


def test_ratio_of_first_attempts():
    c = Clock()
    b = RetryBudget(ratio=0.1, period=10, min_per_second=0, clock=c)
    b.record_attempt(1000)
    assert sum(b.try_retry() for _ in range(1000)) == 100
    assert not b.can_retry()
    b.record_attempt(10)
    assert b.try_retry() and not b.try_retry()


def test_the_window_slides():
    c = Clock()
    b = RetryBudget(ratio=0.5, period=10, min_per_second=0, slots=10, clock=c)
    b.record_attempt(100)
    assert sum(b.try_retry() for _ in range(100)) == 50
    c.t += 5
    assert not b.can_retry()
    c.t += 5.5  # the first slot has slid out: its attempts and retries are forgotten
    assert b.counts() == (0, 0)
    assert not b.can_retry()
    b.record_attempt(4)
    assert sum(b.try_retry() for _ in range(10)) == 2


def test_bound_over_a_random_trace():
    """Over any span shorter than period - period/slots, retries <= ratio * firsts + floor."""
    c = Clock()
    rng = random.Random(11)
    b = RetryBudget(ratio=0.2, period=10, min_per_second=2, slots=20, clock=c)
    start = c.t
    firsts = retries = 0
    while c.t < start + 9.4:
        c.t += rng.expovariate(200)
        if rng.random() < 0.5:
            b.record_attempt()
            firsts += 1
        elif b.try_retry():
            retries += 1
    print("firsts %d retries %d bound %.1f" % (firsts, retries, 0.2 * firsts + 2 * 10))
    assert retries <= 0.2 * firsts + 2 * 10
    assert retries >= 0.2 * firsts  # the budget is not stingier than it says (floor aside)


def test_threads_share_one_budget():
    b = RetryBudget(ratio=0.0, period=60, min_per_second=1)
    got = []

    def worker():
        got.append(sum(b.try_retry() for _ in range(100)))

    ts = [threading.Thread(target=worker) for _ in range(8)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert sum(got) == 60
