"""The client-side limiter over a fake clock, against a slow model that is obviously
right: a token bucket of capacity q refilled q per w seconds, in exact fractions."""

import random
import threading
from fractions import Fraction

from sluice_client import Limiter, headers

NS = 10**9


def parsed(policy=None, limit=None, retry_after=None, status_fields=()):
    h = list(status_fields)
    if policy:
        h.append(("RateLimit-Policy", policy))
    if limit:
        h.append(("RateLimit", limit))
    if retry_after is not None:
        h.append(("Retry-After", retry_after))
    return headers.parse(h, now_ms=0)


class Clock:
    def __init__(self, t=100.0):
        self.t = t

    def __call__(self):
        return self.t


def test_nothing_known_admits_everything():
    lim = Limiter(clock=Clock())
    assert lim.wait() == 0.0
    assert all(lim.try_acquire() for _ in range(1000))


def test_exactly_r_remain_then_one_interval():
    c = Clock()
    lim = Limiter(clock=c)
    lim.update(parsed('"default";q=20;w=1', '"default";r=7;t=1'))
    assert lim.remaining() == {"default": 7}
    assert sum(lim.try_acquire() for _ in range(50)) == 7
    assert lim.wait() == 0.05  # T = 1 s / 20
    c.t += 0.049
    assert not lim.try_acquire()
    c.t += 0.001
    assert lim.try_acquire()


def test_an_interval_that_is_not_whole_nanoseconds():
    """q=7 per 1 s: T = 142857142.857... ns, kept exactly."""
    lim = Limiter(clock=Clock(0))
    lim.update(parsed('"p";q=7;w=1', '"p";r=0'), now=0)
    # the first unit comes back after T, rounded up to the nanosecond
    assert lim.wait(now=0) == 142857143 / NS
    assert not lim.try_acquire(now=142857142 / NS)
    # over exactly one second, exactly 7 come back (no drift however the time is cut)
    n = 0
    for t in list(range(0, NS, 1000003)) + [NS]:
        if lim.try_acquire(now=t / NS):
            n += 1
    assert n == 7


def test_retry_after_of_a_429_admits_nothing_before_it():
    c = Clock()
    lim = Limiter(clock=c)
    lim.update(parsed('"a";q=100;w=1', '"a";r=50;t=1', retry_after="2"), status=429)
    assert lim.wait() == 2.0
    c.t += 1.999
    assert not lim.try_acquire()
    c.t += 0.001
    assert lim.try_acquire()
    # on a 200 a Retry-After does not block
    lim.update(parsed(retry_after="30"), status=200)
    assert lim.wait() == 0.0


def test_all_or_nothing():
    c = Clock()
    lim = Limiter(clock=c)
    lim.update(parsed('"s";q=10;w=1, "m";q=100;w=60', '"s";r=10;t=0, "m";r=3;t=60'))
    assert sum(lim.try_acquire() for _ in range(10)) == 3
    # "m" refused the 4th: "s" gave nothing for it
    assert lim.remaining() == {"s": 7, "m": 0}
    assert abs(lim.wait() - 0.6) < 1e-9  # m's T = 60 s / 100


def test_cost_above_the_quota_is_never():
    lim = Limiter(clock=Clock())
    lim.update(parsed('"a";q=5;w=1', '"a";r=5'))
    assert lim.wait(cost=6) is None
    assert not lim.try_acquire(cost=6)
    assert lim.try_acquire(cost=5)


def test_quota_zero_waits_for_the_reset():
    c = Clock()
    lim = Limiter(clock=c)
    lim.update(parsed('"z";q=0;w=60', '"z";r=0;t=12'))
    assert lim.wait() == 12.0
    c.t += 12
    assert lim.try_acquire()


def test_x_fields_alone_give_a_window():
    c = Clock()
    lim = Limiter(clock=c)
    lim.update(headers.parse([("X-RateLimit-Remaining", "3"), ("X-RateLimit-Reset", "10")], now_ms=0))
    assert sum(lim.try_acquire() for _ in range(10)) == 3
    assert lim.wait() == 10.0
    c.t += 10
    assert lim.try_acquire()


def test_against_a_token_bucket_model():
    """Random times, costs and server updates: every decision and wait equals the model's."""
    rng = random.Random(23)
    for q, w in [(20, 1), (7, 3), (100, 60), (3, 1), (1000, 1)]:
        lim = Limiter(clock=lambda: 0)
        t = 10 * NS
        lim.update(parsed('"p";q=%d;w=%d' % (q, w), '"p";r=%d' % q), now=t / NS)
        tokens, last = Fraction(q), t  # the model
        for _ in range(3000):
            t += rng.choice([0, 1, 999, rng.randrange(w * NS // q * 2 + 1)])
            tokens = min(Fraction(q), tokens + Fraction(t - last) * q / (w * NS))
            last = t
            if rng.random() < 0.05:
                r = rng.randrange(q + 1)
                lim.update(parsed('"p";q=%d;w=%d' % (q, w), '"p";r=%d' % r), now=t / NS)
                tokens = Fraction(r)
                continue
            cost = rng.choice([1, 1, 1, 2, q])
            # the model's wait: until tokens reach cost, rounded up to the nanosecond
            need = max(Fraction(0), cost - tokens)
            want = -(-(need * w * NS) // q)
            got = lim.wait(now=t / NS, cost=cost)
            assert got is not None and round(got * NS) == want, (q, w, t, cost, tokens)
            ok = lim.try_acquire(now=t / NS, cost=cost)
            assert ok == (tokens >= cost)
            if ok:
                tokens -= cost


def test_threads_take_exactly_what_remains():
    lim = Limiter(clock=Clock())
    lim.update(parsed('"a";q=1000;w=3600', '"a";r=500'))
    counts = []

    def worker():
        counts.append(sum(lim.try_acquire() for _ in range(200)))

    ts = [threading.Thread(target=worker) for _ in range(8)]
    for th in ts:
        th.start()
    for th in ts:
        th.join()
    assert sum(counts) == 500


def test_acquire_sleeps_until_admitted():
    c = Clock()
    slept = []

    def sleep(s):
        slept.append(s)
        c.t += s

    lim = Limiter(clock=c)
    lim.update(parsed('"a";q=10;w=1', '"a";r=0'))
    assert lim.acquire(sleep=sleep)
    assert abs(sum(slept) - 0.1) < 1e-9
    assert not lim.acquire(sleep=sleep, timeout=0.05)
