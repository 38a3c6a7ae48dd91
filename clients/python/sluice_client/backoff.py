"""Backoff between retries: exponential with full jitter (the default), or decorrelated
jitter; never sooner than the server said (Retry-After, or CL.THROTTLE's retry_after);
given up when the next try would pass the deadline.

    b = Backoff(base=0.05, cap=2.0, deadline=10.0, rng=random.Random(7))
    sched = b.schedule()              # one per request: its attempts and its deadline
    delay = sched.next(retry_after=1.0)   # seconds to sleep, or None: give up

Full jitter: attempt n (0 for the first retry) sleeps uniform(0, min(cap, base * 2**n)).
Decorrelated: sleeps min(cap, uniform(base, 3 * previous sleep)), the first previous being
base. Either way the sleep is then raised to the server's wait, which may exceed cap (the
server knows better), and a sleep that would end past the deadline gives up.
"""

import random
import time

# base * 2**n is computed with n at most this (a double holds 2**62 exactly).
_MAX_DOUBLINGS = 62


class Backoff:
    """The policy: base and cap in seconds, deadline in seconds from a request's first
    attempt (None: no deadline), `decorrelated` for decorrelated jitter, `rng` the random
    source (a random.Random; default a new one), `clock` seconds (time.monotonic)."""

    def __init__(self, base=0.05, cap=5.0, deadline=30.0, decorrelated=False, rng=None,
                 clock=time.monotonic):
        if not base > 0 or not cap >= base:
            raise ValueError("backoff needs 0 < base <= cap (got base %r, cap %r)" % (base, cap))
        if deadline is not None and not deadline >= 0:
            raise ValueError("deadline must be at least 0 or None (got %r)" % (deadline,))
        self.base = float(base)
        self.cap = float(cap)
        self.deadline = deadline
        self.decorrelated = decorrelated
        self.rng = rng if rng is not None else random.Random()
        self.clock = clock

    def delay(self, attempt, retry_after=None, previous=None):
        """The sleep before retry number `attempt` (0 for the first retry), in seconds:
        jittered, then at least `retry_after` (seconds) when given. `previous` is the sleep
        before this one (decorrelated jitter; None: base)."""
        if attempt < 0:
            raise ValueError("attempt must be at least 0")
        if self.decorrelated:
            prev = self.base if previous is None else max(self.base, previous)
            d = min(self.cap, self.rng.uniform(self.base, prev * 3))
        else:
            d = self.rng.uniform(0, min(self.cap, self.base * 2.0 ** min(attempt, _MAX_DOUBLINGS)))
        if retry_after is not None and retry_after > d:
            d = float(retry_after)
        return d

    def schedule(self, start=None):
        """A Schedule for one request whose first attempt is at `start` (default now)."""
        return Schedule(self, self.clock() if start is None else start)


class Schedule:
    """The retries of one request. Not shared between threads."""

    def __init__(self, backoff, start):
        self.backoff = backoff
        self.start = start
        self.attempt = 0
        self.previous = None

    def next(self, retry_after=None, now=None):
        """Seconds to sleep before the next retry (at least `retry_after`), or None when
        that sleep would end past the deadline: give up."""
        b = self.backoff
        d = b.delay(self.attempt, retry_after, self.previous)
        if b.deadline is not None:
            now = b.clock() if now is None else now
            if now + d > self.start + b.deadline:
                return None
        self.attempt += 1
        self.previous = d
        return d
