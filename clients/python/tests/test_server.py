"""The client against a real sluiced: urllib and requests paced by the limiter, the
redis-py helpers, and the figures of issue 23 (printed with -s): clients that want four
times their limit, with the client half and without, and a retry budget while the server
refuses everything."""

import random
import re
import threading
import time
import urllib.error
import urllib.request

import pytest
import requests

from sluice_client import Backoff, Limiter, RetryBudget, parse
from sluice_client import http as shttp
from sluice_client import resp


def decisions(s):
    """(allowed, rejected) of ad-hoc limits, from sluiced's /metrics."""
    text = urllib.request.urlopen(s.url + "/metrics", timeout=10).read().decode()
    got = {}
    for m in re.finditer(r'^sluice_decisions_total\{policy="",outcome="(\w+)"\} (\d+)$', text,
                         re.M):
        got[m.group(1)] = int(m.group(2))
    return got.get("allowed", 0), got.get("rejected", 0)


def check_url(s, key, limit, period, cost=1):
    return "%s/v1/check?key=%s&limit=%d&period=%s&cost=%d" % (s.url, key, limit, period, cost)


def test_urlopen_paced_by_the_limiter_is_never_refused(server):
    lim = Limiter()
    url = check_url(server, "py:urlopen", 5, "1s")
    statuses = []
    t0 = time.monotonic()
    for _ in range(12):
        with shttp.urlopen(url, limiter=lim) as r:
            statuses.append(r.status)
    took = time.monotonic() - t0
    # The first answer teaches the limiter q=5;w=1: 5 at once (the first taught it), then
    # one each 200 ms.
    assert statuses == [200] * 12
    assert took >= 1.0, took


def test_urlopen_without_the_limiter_raises_the_429(server):
    url = check_url(server, "py:plain", 1, "1h")
    with shttp.urlopen(url) as r:
        assert r.status == 200
    with pytest.raises(urllib.error.HTTPError) as e:
        shttp.urlopen(url)
    assert e.value.code == 429
    assert parse(e.value.headers).retry_after_ms >= 1000


def test_a_429_blocks_the_limiter_until_retry_after(server):
    url = check_url(server, "py:blocked", 1, "1h")
    lim = Limiter()
    shttp.urlopen(url, limiter=lim).close()
    with pytest.raises(shttp.GaveUp):
        # the limiter knows q=1;w=3600 and r=0: nothing for an hour, past the deadline
        shttp.urlopen(url, limiter=lim, backoff=Backoff(deadline=1.0))
    assert lim.wait() > 3000


def test_requests_adapter_retries_after_the_backoff(server):
    s = requests.Session()
    lim = Limiter()
    shttp.mount(s, limiter=lim, backoff=Backoff(base=0.01, cap=0.2, deadline=5.0,
                                                 rng=random.Random(1)))
    url = check_url(server, "py:adapter", 2, "1s")
    codes = [s.get(url, timeout=10).status_code for _ in range(6)]
    assert codes == [200] * 6
    assert lim.remaining()["default"] <= 2


def test_redis_py_helpers(server):
    r = server.redis()
    d = resp.throttle(r, "py:cell", burst=1, rate=1, period=60)
    assert (d.allowed, d.limit, d.remaining, d.retry_after) == (True, 2, 1, None)
    resp.throttle(r, "py:cell", 1, 1, 60)
    d = resp.throttle(r, "py:cell", 1, 1, 60)
    assert not d.allowed and d.retry_after > 0
    lease = resp.acquire(r, "py:lease", 1, 30000)
    assert lease is not None and resp.acquire(r, "py:lease", 1, 30000) is None
    assert resp.release(r, "py:lease", lease) == 1
    r.close()


# ---- the figures ----

LIMIT = 10          # per second, per client (each its own key, as an API key is)
WANT = 4 * LIMIT    # what each client would send
CLIENTS = 20
SECONDS = 8.0


def run_clients(s, prefix, paced):
    """CLIENTS threads, each sending at WANT a second for SECONDS on its own key, through a
    requests Session (with the client half when paced). Returns the times of the admitted
    requests per client and what the server decided meanwhile."""
    before = decisions(s)
    start = time.monotonic()
    end = start + SECONDS
    admitted = [[] for _ in range(CLIENTS)]

    def client(i):
        sess = requests.Session()
        if paced:
            shttp.mount(sess, limiter=Limiter(),
                        backoff=Backoff(base=0.02, cap=1.0, deadline=5.0, rng=random.Random(i)),
                        budget=RetryBudget(ratio=0.1, period=10.0, min_per_second=1.0))
        url = check_url(s, "%s:%d" % (prefix, i), LIMIT, "1s")
        nxt = time.monotonic()
        while True:
            now = time.monotonic()
            if now >= end:
                break
            if nxt > now:
                time.sleep(nxt - now)
            nxt += 1.0 / WANT
            try:
                r = sess.get(url, timeout=10)
            except shttp.GaveUp:
                continue
            if r.status_code == 200:
                admitted[i].append(time.monotonic() - start)
        sess.close()

    threads = [threading.Thread(target=client, args=(i,)) for i in range(CLIENTS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    after = decisions(s)
    return admitted, after[0] - before[0], after[1] - before[1]


def steady_rate(times):
    """A client's admitted rate: what it got past the burst (LIMIT, which a key starts
    with and, after a stall of a second, may hold again), over the run."""
    return (len(times) - LIMIT) / SECONDS


def test_clients_with_the_client_half_are_not_refused(make_server):
    s = make_server(["--threads", "2"])
    admitted, allowed, rejected = run_clients(s, "paced", paced=True)
    share = rejected / (allowed + rejected)
    rates = [steady_rate(a) for a in admitted]
    total = sum(rates)
    print("\nwith the client half: %d clients wanting %d/s each, limit %d/s each: server "
          "refused %.2f%% of %d requests; admitted %.1f/s in all (limit %d), per client "
          "%.1f to %.1f/s" % (CLIENTS, WANT, LIMIT, 100 * share, allowed + rejected, total,
                              CLIENTS * LIMIT, min(rates), max(rates)))
    plain, p_allowed, p_rejected = run_clients(s, "plain", paced=False)
    p_share = p_rejected / (p_allowed + p_rejected)
    print("without it: server refused %.2f%% of %d requests; admitted %.1f/s in all"
          % (100 * p_share, p_allowed + p_rejected, sum(steady_rate(a) for a in plain)))
    assert share < 0.05
    assert abs(total - CLIENTS * LIMIT) <= 0.05 * CLIENTS * LIMIT
    for r in rates:
        assert abs(r - LIMIT) <= 0.05 * LIMIT * 2, rates  # each client within 10%
    # How much the plain clients offer is up to this machine's Python (20 threads under one
    # GIL); whatever it is, the server refuses what passes the limits, and admits no more.
    assert p_rejected > 0 and p_share > 10 * share, "without it the clients are refused"
    assert p_allowed <= CLIENTS * LIMIT * (SECONDS + 2)


def test_a_retry_budget_bounds_the_retries_of_an_outage(make_server):
    """cost 2 on a limit of 1 is refused every time, with no Retry-After (no wait would
    do): the backoff alone would retry each first attempt until its deadline; the budget
    lets at most ratio * first attempts + the floor through. The budget's window (20 s)
    is longer than the run: its bound holds over any span shorter than the window."""
    s = make_server(["--threads", "2"])
    ratio, floor, period, clients, seconds = 0.1, 0.2, 20.0, 5, 10.0

    def run(with_budget):
        before = decisions(s)
        firsts = [0] * clients
        end = time.monotonic() + seconds

        def client(i):
            sess = requests.Session()
            budget = RetryBudget(ratio=ratio, period=period, min_per_second=floor) \
                if with_budget else None
            shttp.mount(sess, backoff=Backoff(base=0.005, cap=0.05, deadline=0.5,
                                              rng=random.Random(i)), budget=budget)
            url = check_url(s, "outage:%d" % i, 1, "10s", cost=2)
            while time.monotonic() < end:
                firsts[i] += 1
                assert sess.get(url, timeout=10).status_code == 429
            sess.close()

        threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        after = decisions(s)
        assert after[0] == before[0], "nothing was admitted"
        return sum(firsts), after[1] - before[1]

    first, total = run(True)
    bound = (1 + ratio) * first + clients * floor * period
    print("\nretry budget %.0f%% + %.1f/s, %d clients, %.0f s of refusals: %d first attempts, "
          "%d requests in all (bound %.0f)" % (100 * ratio, floor, clients, seconds, first,
                                               total, bound))
    n_first, n_total = run(False)
    print("without a budget: %d first attempts, %d requests in all (%.1fx)"
          % (n_first, n_total, n_total / n_first))
    assert total <= bound
    assert n_total > 2 * n_first, "without the budget the backoff retries each many times"
