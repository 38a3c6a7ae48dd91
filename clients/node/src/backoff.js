// Backoff between retries: exponential with full jitter (the default), or decorrelated
// jitter; never sooner than the server said (Retry-After, or CL.THROTTLE's retry_after);
// given up when the next try would pass the deadline.
//
//   const b = new Backoff({ baseMs: 50, capMs: 2000, deadlineMs: 10000, random: seededRandom(7) });
//   const sched = b.schedule();                        // one per request
//   const delay = sched.next({ retryAfterMs: 1000 });  // ms to sleep, or null: give up
//
// Full jitter: attempt n (0 for the first retry) sleeps uniform(0, min(cap, base * 2^n)).
// Decorrelated: sleeps min(cap, uniform(base, 3 * previous sleep)), the first previous being
// base. Either way the sleep is then raised to the server's wait, which may exceed cap (the
// server knows better), and a sleep that would end past the deadline gives up.
// Every time is in milliseconds.

// base * 2^n is computed with n at most this (a double holds 2^62 exactly).
const MAX_DOUBLINGS = 62;

const monotonicMs = () => performance.now();

export class Backoff {
  /**
   * baseMs and capMs: the first ceiling and the largest; deadlineMs: from a request's first
   * attempt (null: no deadline); decorrelated: decorrelated jitter instead of full;
   * random: the random source, a function returning [0, 1) (default Math.random;
   * seededRandom(seed) for a replayable one); clock: milliseconds (performance.now).
   * Throws a RangeError on 0 >= base, cap < base or a negative deadline.
   */
  constructor({ baseMs = 50, capMs = 5000, deadlineMs = 30000, decorrelated = false,
    random = Math.random, clock = monotonicMs } = {}) {
    if (!(baseMs > 0) || !(capMs >= baseMs)) {
      throw new RangeError(`backoff needs 0 < baseMs <= capMs (got baseMs ${baseMs}, capMs ${capMs})`);
    }
    if (deadlineMs !== null && !(deadlineMs >= 0)) {
      throw new RangeError(`deadlineMs must be at least 0 or null (got ${deadlineMs})`);
    }
    this.baseMs = Number(baseMs);
    this.capMs = Number(capMs);
    this.deadlineMs = deadlineMs === null ? null : Number(deadlineMs);
    this.decorrelated = Boolean(decorrelated);
    this.random = random;
    this.clock = clock;
  }

  /**
   * The sleep before retry number `attempt` (0 for the first retry), in ms: jittered, then
   * at least `retryAfterMs` when given. `previousMs`: the sleep before this one
   * (decorrelated jitter; absent: base).
   */
  delay(attempt, { retryAfterMs = null, previousMs = null } = {}) {
    if (!(attempt >= 0)) throw new RangeError('attempt must be at least 0');
    let d;
    if (this.decorrelated) {
      const prev = previousMs === null ? this.baseMs : Math.max(this.baseMs, previousMs);
      d = Math.min(this.capMs, this.#uniform(this.baseMs, prev * 3));
    } else {
      const ceiling = Math.min(this.capMs, this.baseMs * 2 ** Math.min(attempt, MAX_DOUBLINGS));
      d = this.#uniform(0, ceiling);
    }
    if (retryAfterMs !== null && retryAfterMs !== undefined && Number(retryAfterMs) > d) {
      d = Number(retryAfterMs);
    }
    return d;
  }

  #uniform(a, b) {
    return a + (b - a) * this.random();
  }

  /** A Schedule for one request whose first attempt is at `startMs` (default now). */
  schedule(startMs = null) {
    return new Schedule(this, startMs === null ? this.clock() : startMs);
  }
}

/** The retries of one request: how many so far, the last sleep, and its deadline. */
export class Schedule {
  constructor(backoff, startMs) {
    this.backoff = backoff;
    this.startMs = startMs;
    this.attempt = 0;
    this.previousMs = null;
  }

  /**
   * Milliseconds to sleep before the next retry (at least `retryAfterMs`), or null when
   * that sleep would end past the deadline: give up. `now`: ms on the backoff's clock.
   */
  next({ retryAfterMs = null, now = null } = {}) {
    const b = this.backoff;
    const d = b.delay(this.attempt, { retryAfterMs, previousMs: this.previousMs });
    if (b.deadlineMs !== null) {
      const t = now === null ? b.clock() : now;
      if (t + d > this.startMs + b.deadlineMs) return null;
    }
    this.attempt += 1;
    this.previousMs = d;
    return d;
  }
}
