// fetch that paces itself by the server's rate limit fields.
//
//   const limitedFetch = wrapFetch({ limiter: new Limiter(), backoff: new Backoff(),
//                                    budget: new RetryBudget() });
//   const res = await limitedFetch('http://127.0.0.1:7380/v1/check?key=u1&limit=20&period=1s');
//
// Each request:
// 1. waits until the limiter admits it (never past the backoff's deadline: then it is given
//    up, GaveUp), and counts as a first attempt in the budget;
// 2. is sent; the response's fields go back into the limiter (parse, Limiter.update);
// 3. on a 429 or 503, is retried after the backoff's next sleep (at least Retry-After), when
//    the deadline is not passed and the budget allows one more retry (each retry waits for
//    the limiter again); otherwise the refusal is the answer, returned as fetch returns any
//    response.
//
// Every part is optional: with none, this is the fetch it wraps. A retry sends the request
// again: a Request is cloned before each attempt, and a body given in `init` is sent again
// as it is, so it must be one that can be (a string, a Buffer, URLSearchParams, FormData, a
// Blob; not a ReadableStream).

import { parse } from './headers.js';
import { defaultSleep } from './limiter.js';

export const RETRY_STATUSES = [429, 503];

/**
 * The limiter would not admit the request before the backoff's deadline (or ever): it was
 * not sent. `waitMs` is the limiter's wait (null: never).
 */
export class GaveUp extends Error {
  constructor(waitMs) {
    super(`the client-side limiter admits no request ${waitMs === null ? 'ever'
      : `within the deadline (${waitMs.toFixed(3)} ms)`}`);
    this.name = 'GaveUp';
    this.waitMs = waitMs;
  }
}

// One request's rate limiting: the limiter, the backoff schedule and the budget.
class Pacer {
  constructor({ limiter, backoff, budget, sleep, clock }) {
    this.limiter = limiter;
    this.budget = budget;
    this.sleep = sleep;
    this.clock = clock ?? (limiter ? limiter.clock : backoff ? backoff.clock : () => performance.now());
    const now = this.clock();
    this.schedule = backoff ? backoff.schedule(now) : null;
    this.deadline = backoff && backoff.deadlineMs !== null ? now + backoff.deadlineMs : null;
    this.retries = 0;
    if (budget) budget.recordAttempt();
  }

  /** Waits until the limiter admits the request and takes from it; GaveUp when it would not
   * before the deadline. */
  async admit(signal) {
    if (!this.limiter) return;
    for (;;) {
      const now = this.clock();
      if (this.limiter.tryAcquire({ now })) return;
      const w = this.limiter.wait({ now });
      if (w === null || (this.deadline !== null && now + w > this.deadline)) throw new GaveUp(w);
      await this.sleep(w, signal);
    }
  }

  /** Feeds a response back; the ms to sleep before a retry, or null when this answer is the
   * last. */
  answered(status, headers) {
    const parsed = parse(headers);
    if (this.limiter) this.limiter.update(parsed, { now: this.clock(), status });
    if (!RETRY_STATUSES.includes(status) || !this.schedule) return null;
    const ra = parsed.retryAfterMs === null ? null : Number(parsed.retryAfterMs);
    const delay = this.schedule.next({ retryAfterMs: ra, now: this.clock() });
    if (delay === null) return null;
    if (this.budget && !this.budget.tryRetry()) return null;
    this.retries += 1;
    return delay;
  }
}

/**
 * A function with fetch's signature, (input, init) => Promise<Response>, that paces each
 * request by `limiter`, retries it on 429/503 by `backoff` within `budget`, and returns the
 * last response (rejects with GaveUp when the limiter would not admit the request in time,
 * with the signal's abort error when init.signal or the Request's aborts, and as fetch
 * rejects on a network error: those are not retried). `fetch`: the fetch to wrap (default
 * globalThis.fetch); `sleep(ms, signal)` and `clock()` (ms): for tests.
 */
export function wrapFetch({ limiter = null, backoff = null, budget = null, fetch = globalThis.fetch,
  sleep = defaultSleep, clock = null } = {}) {
  if (typeof fetch !== 'function') throw new TypeError('wrapFetch needs a fetch function (Node 18 or later has one)');
  return async function limitedFetch(input, init = undefined) {
    const signal = init?.signal ?? (typeof Request !== 'undefined' && input instanceof Request ? input.signal : undefined);
    const pacer = new Pacer({ limiter, backoff, budget, sleep, clock });
    for (;;) {
      await pacer.admit(signal);
      const attempt = typeof Request !== 'undefined' && input instanceof Request ? input.clone() : input;
      const res = await fetch(attempt, init);
      const delay = pacer.answered(res.status, res.headers);
      if (delay === null) return res;
      // Read the (small) body of the refusal: the connection goes back to the pool.
      try {
        await res.arrayBuffer();
      } catch {
        // a body cut short changes nothing: the request is sent again
      }
      await sleep(delay, signal);
    }
  };
}
