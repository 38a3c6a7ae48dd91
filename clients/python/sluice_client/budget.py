"""A retry budget: retries at most `ratio` of the first attempts made over a sliding
`period`, plus a floor of `min_per_second` retries a second (so that a client that sends
little can still retry), as Finagle's and gRPC's budgets do. When a dependency fails, the
retries add at most that share to its load instead of multiplying it.

    budget = RetryBudget(ratio=0.1, period=10.0, min_per_second=1.0)
    budget.record_attempt()          # each first attempt
    if budget.try_retry(): ...       # each retry: True (and counted) when the budget allows

Over any span of time no longer than period - period/slots, the retries allowed number at
most ratio * first attempts + min_per_second * period. The counts live in `slots` buckets
of period/slots seconds each: bounded memory whatever the rate. Thread-safe.
"""

import threading
import time
from fractions import Fraction


class RetryBudget:
    def __init__(self, ratio=0.1, period=10.0, min_per_second=1.0, slots=20, clock=time.monotonic):
        if not ratio >= 0 or not period > 0 or not min_per_second >= 0 or slots < 1:
            raise ValueError("a retry budget needs ratio >= 0, period > 0, min_per_second >= 0, slots >= 1")
        self.ratio = ratio
        self.period = float(period)
        self.min_per_second = min_per_second
        # Exact fractions (0.1 is 1/10), so that "at most ratio * first attempts" holds
        # to the unit, with no rounding of 0.1 * n either way.
        self._ratio = Fraction(ratio).limit_denominator(10**6)
        self._floor = (Fraction(min_per_second).limit_denominator(10**6) *
                       Fraction(period).limit_denominator(10**6))
        self.slots = int(slots)
        self.clock = clock
        self._width = self.period / self.slots
        self._lock = threading.Lock()
        self._first = [0] * self.slots  # first attempts per slot
        self._retry = [0] * self.slots  # retries per slot
        self._slot = None               # the index (time / width) of the newest slot

    def _advance(self, now):
        """Clears the slots that have slid out of the window. Under the lock."""
        s = int(now // self._width)
        if self._slot is None:
            self._slot = s
        elif s > self._slot:
            for k in range(self._slot + 1, min(s, self._slot + self.slots) + 1):
                self._first[k % self.slots] = 0
                self._retry[k % self.slots] = 0
            self._slot = s
        return self._slot % self.slots

    def record_attempt(self, n=1):
        """Counts `n` first attempts (not retries)."""
        with self._lock:
            self._first[self._advance(self.clock())] += n

    def _allowed(self):
        return self._ratio * sum(self._first) + self._floor

    def can_retry(self):
        """Would a retry be allowed now? (Counts nothing.)"""
        with self._lock:
            self._advance(self.clock())
            return sum(self._retry) + 1 <= self._allowed()

    def try_retry(self):
        """True, and the retry counted, when the budget allows one more now."""
        with self._lock:
            i = self._advance(self.clock())
            if sum(self._retry) + 1 > self._allowed():
                return False
            self._retry[i] += 1
            return True

    def counts(self):
        """(first attempts, retries) in the window now."""
        with self._lock:
            self._advance(self.clock())
            return sum(self._first), sum(self._retry)
