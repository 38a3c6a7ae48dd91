"""HTTP clients that pace themselves by the server's rate limit fields.

`urlopen(req, limiter=, backoff=, budget=)` is urllib.request.urlopen with the client's
half of rate limiting around it; `mount(session, limiter=, backoff=, budget=)` puts the
same into a requests Session (an HTTPAdapter subclass; requests is imported only then).
Each request:

1. waits until the limiter admits it (never past the backoff's deadline: then it is given
   up, `GaveUp`), and counts as a first attempt in the budget;
2. is sent; the response's fields go back into the limiter (headers.parse, Limiter.update);
3. on a 429 or 503, is retried after the backoff's next sleep (at least Retry-After), when
   the deadline is not passed and the budget allows one more retry (each retry waits for
   the limiter again); otherwise the refusal is the answer: urlopen raises its HTTPError,
   as urllib does, and the requests adapter returns the response.

Every part is optional: with none, these are urllib's and requests' plain behaviour.
"""

import time
import urllib.error
import urllib.request

from . import headers as _headers

RETRY_STATUSES = (429, 503)


class GaveUp(Exception):
    """The limiter would not admit the request before the backoff's deadline (or ever):
    it was not sent. `wait` is the limiter's wait in seconds (None: never)."""

    def __init__(self, wait):
        super().__init__("the client-side limiter admits no request %s" %
                         ("ever" if wait is None else "within the deadline (%.3fs)" % wait))
        self.wait = wait


class _Pacer:
    """One request's rate limiting: the limiter, the backoff schedule and the budget."""

    def __init__(self, limiter, backoff, budget, sleep, clock):
        self.limiter = limiter
        self.budget = budget
        self.sleep = sleep
        self.clock = clock if clock is not None else (
            limiter.clock if limiter is not None else time.monotonic)
        now = self.clock()
        self.schedule = backoff.schedule(now) if backoff is not None else None
        self.deadline = (now + backoff.deadline
                         if backoff is not None and backoff.deadline is not None else None)
        self.retries = 0
        if budget is not None:
            budget.record_attempt()

    def admit(self):
        """Waits until the limiter admits the request and takes from it; GaveUp when it
        would not before the deadline."""
        if self.limiter is None:
            return
        while True:
            now = self.clock()
            if self.limiter.try_acquire(now):
                return
            w = self.limiter.wait(now)
            if w is None or (self.deadline is not None and now + w > self.deadline):
                raise GaveUp(w)
            self.sleep(max(w, 1e-4))

    def answered(self, status, fields):
        """Feeds a response back; returns the seconds to sleep before a retry, or None
        when this answer is the last."""
        parsed = _headers.parse(fields)
        if self.limiter is not None:
            self.limiter.update(parsed, now=self.clock(), status=status)
        if status not in RETRY_STATUSES or self.schedule is None:
            return None
        ra = parsed.retry_after_ms
        delay = self.schedule.next(retry_after=None if ra is None else ra / 1000.0, now=self.clock())
        if delay is None:
            return None
        if self.budget is not None and not self.budget.try_retry():
            return None
        self.retries += 1
        return delay


def urlopen(req, limiter=None, backoff=None, budget=None, timeout=10.0, opener=None,
            sleep=time.sleep, clock=None):
    """urllib.request.urlopen(req) (a URL or a Request) paced by `limiter`, retried on
    429/503 by `backoff` within `budget`. Returns the response (the caller closes it);
    raises urllib.error.HTTPError for an error status that is not retried (any, as urllib
    does), GaveUp when the limiter would not admit the request in time. `opener`: an
    OpenerDirector (default urllib's); `sleep`, `clock`: for tests."""
    open_ = opener.open if opener is not None else urllib.request.urlopen
    pacer = _Pacer(limiter, backoff, budget, sleep, clock)
    while True:
        pacer.admit()
        try:
            resp = open_(req, timeout=timeout)
        except urllib.error.HTTPError as e:
            delay = pacer.answered(e.code, e.headers)
            if delay is None:
                raise
            e.close()
            sleep(delay)
            continue
        pacer.answered(resp.status, resp.headers)
        return resp


_ADAPTER = None


def adapter_class():
    """The requests HTTPAdapter subclass (built on first use: requests is imported then)."""
    global _ADAPTER
    if _ADAPTER is None:
        from requests.adapters import HTTPAdapter

        class SluiceAdapter(HTTPAdapter):
            """An HTTPAdapter whose send() waits for the limiter, feeds every response
            back to it, and retries a 429/503 after the backoff when the budget allows.
            A refusal that is not retried is returned as requests returns any response."""

            def __init__(self, limiter=None, backoff=None, budget=None, sleep=time.sleep,
                         clock=None, **kw):
                super().__init__(**kw)
                self.limiter = limiter
                self.backoff = backoff
                self.budget = budget
                self.sleep = sleep
                self.clock = clock

            def send(self, request, **kwargs):
                pacer = _Pacer(self.limiter, self.backoff, self.budget, self.sleep, self.clock)
                while True:
                    pacer.admit()
                    resp = super().send(request, **kwargs)
                    raw = getattr(resp, "raw", None)
                    fields = raw.headers if raw is not None and hasattr(raw, "headers") else resp.headers
                    delay = pacer.answered(resp.status_code, fields)
                    if delay is None:
                        return resp
                    resp.content  # read the small body: the connection goes back to the pool
                    resp.close()
                    self.sleep(delay)

        _ADAPTER = SluiceAdapter
    return _ADAPTER


def mount(session, limiter=None, backoff=None, budget=None, prefixes=("http://", "https://"), **kw):
    """Mounts a SluiceAdapter on `session` for each prefix and returns it. `kw` go to
    requests' HTTPAdapter (pool_connections, pool_maxsize, ...)."""
    adapter = adapter_class()(limiter=limiter, backoff=backoff, budget=budget, **kw)
    for p in prefixes:
        session.mount(p, adapter)
    return adapter
