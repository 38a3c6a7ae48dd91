"""A client-side limiter that mirrors what the server advertises, so that a client waits
before sending instead of being refused after.

Each policy of RateLimit-Policy (`q` per `w` seconds) gets a local GCRA with a burst of q,
with sluice's own arithmetic (src/algo/gcra.c, include/sluice.h): the emission interval is
T = w * 10^9 / q ns and the tolerance tau = q * T (burst q); a request of cost c is admitted
when max(TAT, now) + c*T <= now + tau, and then TAT = max(TAT, now) + c*T. Times are
integer nanoseconds; so that T is exact when q does not divide w * 10^9, each GCRA keeps
its times in units of 1/q ns (T is then w * 10^9 units), as sluice keeps a fraction of a
nanosecond.

A response's RateLimit member (`r` remaining) sets its policy's TAT to now + (q - r)*T:
exactly r remain, and never fewer units owed than the server's (whose debt d has
ceil(d / T) = q - r). A 429 or 503 with Retry-After admits nothing before it. A response
with only X-RateLimit-Remaining and -Reset (no policy) gets a window: that many until the
reset, then nothing known. A request is admitted only when all admit, all or nothing.

    lim = Limiter()
    time.sleep(lim.wait())            # seconds until the next request would be admitted
    if lim.try_acquire(): send ...
    lim.update(headers.parse(resp.headers), status=resp.status)

Thread-safe: one lock around every state.
"""

import threading
import time

NS = 1_000_000_000
# At most this many policies are remembered (the least recently advertised goes first).
MAX_POLICIES = 64


def _ceil_div(a, b):
    return -(-a // b)


class _Gcra:
    """One advertised policy: q per w seconds, burst q. Times in units of 1/q ns."""

    __slots__ = ("q", "w", "t_units", "tat")

    def __init__(self, q, w):
        self.q = q
        self.w = w
        self.t_units = w * NS  # T in units of 1/q ns
        self.tat = 0           # 0: never seen (a full bucket)

    def wait_ns(self, now_ns, cost):
        """Nanoseconds until `cost` would be admitted (0: now; None: never, cost > q)."""
        if cost > self.q:
            return None
        now = now_ns * self.q
        start = max(self.tat, now)
        over = start + cost * self.t_units - (now + self.q * self.t_units)
        return 0 if over <= 0 else _ceil_div(over, self.q)

    def take(self, now_ns, cost):
        self.tat = max(self.tat, now_ns * self.q) + cost * self.t_units

    def set_remaining(self, now_ns, r):
        owed = self.q - min(max(r, 0), self.q)
        self.tat = now_ns * self.q + owed * self.t_units

    def remaining(self, now_ns):
        debt = max(0, self.tat - now_ns * self.q)
        return self.q - _ceil_div(debt, self.t_units)


class _Window:
    """X-RateLimit-* only: `left` units until `reset_ns`, then nothing known (admit)."""

    __slots__ = ("left", "reset_ns")

    def __init__(self, left, reset_ns):
        self.left = left
        self.reset_ns = reset_ns

    def wait_ns(self, now_ns, cost):
        if now_ns >= self.reset_ns or cost <= self.left:
            return 0
        return self.reset_ns - now_ns

    def take(self, now_ns, cost):
        if now_ns < self.reset_ns:
            self.left -= cost


class Limiter:
    """The client's mirror of the server's limits. `clock` returns seconds (default
    time.monotonic); every `now` argument is seconds on that clock."""

    def __init__(self, clock=time.monotonic):
        self.clock = clock
        self._lock = threading.Lock()
        self._policies = {}   # name (or "#i" for an unnamed one) -> _Gcra, oldest first
        self._window = None   # a _Window when only X-RateLimit-* is known
        self._blocked_ns = 0  # nothing is admitted before this (Retry-After)

    def _now_ns(self, now):
        return int(round((self.clock() if now is None else now) * NS))

    def update(self, parsed, now=None, status=None):
        """Takes in what a response said (a headers.Parsed) at `now`. `status`: the
        response's status; its Retry-After counts on a 429 or 503, or when not given."""
        now_ns = self._now_ns(now)
        with self._lock:
            for i, p in enumerate(parsed.policies):
                if p.window is None:
                    continue
                name = p.name if p.name is not None else "#%d" % i
                g = self._policies.pop(name, None)
                if g is None or (g.q, g.w) != (p.quota, p.window):
                    g = _Gcra(p.quota, p.window)
                self._policies[name] = g  # now the most recent
            while len(self._policies) > MAX_POLICIES:
                self._policies.pop(next(iter(self._policies)))
            for lim in parsed.limits:
                g = self._policies.get(lim.name)
                if g is not None:
                    g.set_remaining(now_ns, lim.remaining)
            x = parsed.x
            if not parsed.policies and x is not None and x.remaining is not None \
                    and x.reset_ms is not None:
                self._window = _Window(x.remaining, now_ns + x.reset_ms * 1_000_000)
            if parsed.retry_after_ms is not None and (status is None or status in (429, 503)):
                self._blocked_ns = max(self._blocked_ns, now_ns + parsed.retry_after_ms * 1_000_000)
            resets = {lm.name: lm.reset_ms for lm in parsed.limits if lm.reset_ms is not None}
            for p in parsed.policies:
                if p.quota == 0 and p.window is not None:  # nothing in this window: wait for its reset
                    reset_ms = resets.get(p.name, p.window * 1000)
                    self._blocked_ns = max(self._blocked_ns, now_ns + reset_ms * 1_000_000)

    def _wait_ns(self, now_ns, cost):
        """Under the lock: nanoseconds until all admit `cost` (None: never)."""
        w = max(0, self._blocked_ns - now_ns)
        for g in self._policies.values():
            if g.q == 0:
                continue  # blocked above until its reset
            d = g.wait_ns(now_ns, cost)
            if d is None:
                return None
            w = max(w, d)
        if self._window is not None:
            w = max(w, self._window.wait_ns(now_ns, cost))
        return w

    def wait(self, now=None, cost=1):
        """Seconds until a request of `cost` would be admitted: 0.0 now, None never (the
        cost exceeds an advertised quota)."""
        with self._lock:
            w = self._wait_ns(self._now_ns(now), cost)
        return None if w is None else w / NS

    def try_acquire(self, now=None, cost=1):
        """Takes `cost` from every local limit and returns True when all admit it now;
        else takes nothing and returns False."""
        now_ns = self._now_ns(now)
        with self._lock:
            if self._wait_ns(now_ns, cost) != 0:
                return False
            for g in self._policies.values():
                if g.q:
                    g.take(now_ns, cost)
            if self._window is not None:
                self._window.take(now_ns, cost)
            return True

    def acquire(self, cost=1, timeout=None, sleep=time.sleep):
        """Waits (with `sleep`) until `cost` is admitted and takes it: True; False when
        that would take longer than `timeout` seconds, or never comes."""
        start = self.clock()
        while True:
            now = self.clock()
            if self.try_acquire(now, cost):
                return True
            w = self.wait(now, cost)
            if w is None or (timeout is not None and now + w > start + timeout):
                return False
            sleep(max(w, 1e-4))

    def remaining(self, now=None):
        """{policy name: units left now}, as the local limits see them."""
        now_ns = self._now_ns(now)
        with self._lock:
            return {n: g.remaining(now_ns) for n, g in self._policies.items()}
