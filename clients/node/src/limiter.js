// A client-side limiter that mirrors what the server advertises, so that a client waits
// before sending instead of being refused after.
//
// Each policy of RateLimit-Policy (`q` per `w` seconds) gets a local GCRA with a burst of q,
// with sluice's own arithmetic (src/algo/gcra.c, include/sluice.h): the emission interval is
// T = w * 10^9 / q ns and the tolerance tau = q * T (burst q); a request of cost c is
// admitted when max(TAT, now) + c*T <= now + tau, and then TAT = max(TAT, now) + c*T. Times
// are integer nanoseconds, in BigInts (a TAT in units of 1/q ns passes 2^53 within a day);
// so that T is exact when q does not divide w * 10^9, each GCRA keeps its times in units of
// 1/q ns (T is then w * 10^9 units), as sluice keeps a fraction of a nanosecond.
//
// A response's RateLimit member (`r` remaining) sets its policy's TAT to now + (q - r)*T:
// exactly r remain, and never fewer units owed than the server's (whose debt d has
// ceil(d / T) = q - r). A 429 or 503 with Retry-After admits nothing before it. A response
// with only X-RateLimit-Remaining and -Reset (no policy) gets a window: that many until the
// reset, then nothing known. A request is admitted only when all admit, all or nothing.
//
//   const lim = new Limiter();
//   await lim.acquire();                 // or: lim.wait() ms until admitted, lim.tryAcquire()
//   lim.update(parse(res.headers), { status: res.status });
//
// Times given and returned are milliseconds on the limiter's clock (performance.now by
// default), converted to whole nanoseconds on the way in. One Limiter may be shared by every
// request of a process: no method but acquire() awaits, so none run interleaved.

import { setTimeout as sleepMs } from 'node:timers/promises';

const NS = 1000000000n;
const NS_PER_MS = 1000000n;
/** At most this many policies are remembered (the least recently advertised goes first). */
export const MAX_POLICIES = 64;

const monotonicMs = () => performance.now();
const big = (v) => BigInt(v);
const maxBig = (a, b) => (a > b ? a : b);
const ceilDiv = (a, b) => (a >= 0n ? (a + b - 1n) / b : -(-a / b));

// One advertised policy: q per w seconds, burst q. Times in units of 1/q ns.
class Gcra {
  constructor(q, w) {
    this.q = q;
    this.w = w;
    this.tUnits = w * NS; // T in units of 1/q ns
    this.tat = 0n;        // 0: never seen (a full bucket)
  }

  /** Nanoseconds until `cost` would be admitted (0n: now; null: never, cost > q). */
  waitNs(nowNs, cost) {
    if (cost > this.q) return null;
    const now = nowNs * this.q;
    const start = maxBig(this.tat, now);
    const over = start + cost * this.tUnits - (now + this.q * this.tUnits);
    return over <= 0n ? 0n : ceilDiv(over, this.q);
  }

  take(nowNs, cost) {
    this.tat = maxBig(this.tat, nowNs * this.q) + cost * this.tUnits;
  }

  setRemaining(nowNs, r) {
    const owed = this.q - (r < 0n ? 0n : r > this.q ? this.q : r);
    this.tat = nowNs * this.q + owed * this.tUnits;
  }

  remaining(nowNs) {
    const debt = maxBig(0n, this.tat - nowNs * this.q);
    return this.q - ceilDiv(debt, this.tUnits);
  }
}

// X-RateLimit-* only: `left` units until `resetNs`, then nothing known (admit).
class Window {
  constructor(left, resetNs) {
    this.left = left;
    this.resetNs = resetNs;
  }

  waitNs(nowNs, cost) {
    if (nowNs >= this.resetNs || cost <= this.left) return 0n;
    return this.resetNs - nowNs;
  }

  take(nowNs, cost) {
    if (nowNs < this.resetNs) this.left -= cost;
  }
}

export class Limiter {
  /** clock: milliseconds (default performance.now); every `now` is ms on that clock. */
  constructor({ clock = monotonicMs } = {}) {
    this.clock = clock;
    this._policies = new Map(); // name (or "#i" for an unnamed one) -> Gcra, oldest first
    this._window = null;        // a Window when only X-RateLimit-* is known
    this._blockedNs = 0n;       // nothing is admitted before this (Retry-After)
  }

  _nowNs(now) {
    const ms = now === null || now === undefined ? this.clock() : now;
    return BigInt(Math.round(ms * 1e6));
  }

  /**
   * Takes in what a response said (parse()'s answer) at `now`. `status`: the response's
   * status; its Retry-After counts on a 429 or 503, or when no status is given.
   */
  update(parsed, { now = null, status = null } = {}) {
    const nowNs = this._nowNs(now);
    parsed.policies.forEach((p, i) => {
      if (p.window === null) return;
      const name = p.name !== null ? p.name : `#${i}`;
      let g = this._policies.get(name);
      this._policies.delete(name);
      if (g === undefined || g.q !== big(p.quota) || g.w !== big(p.window)) g = new Gcra(big(p.quota), big(p.window));
      this._policies.set(name, g); // now the most recent
    });
    while (this._policies.size > MAX_POLICIES) this._policies.delete(this._policies.keys().next().value);
    for (const lim of parsed.limits) {
      const g = this._policies.get(lim.name);
      if (g !== undefined) g.setRemaining(nowNs, big(lim.remaining));
    }
    const x = parsed.x;
    if (parsed.policies.length === 0 && x && x.remaining !== null && x.resetMs !== null) {
      this._window = new Window(big(x.remaining), nowNs + big(x.resetMs) * NS_PER_MS);
    }
    if (parsed.retryAfterMs !== null && (status === null || status === 429 || status === 503)) {
      this._blockedNs = maxBig(this._blockedNs, nowNs + big(parsed.retryAfterMs) * NS_PER_MS);
    }
    const resets = new Map(parsed.limits.filter((l) => l.resetMs !== null).map((l) => [l.name, l.resetMs]));
    for (const p of parsed.policies) {
      if (p.quota === 0 && p.window !== null) { // nothing in this window: wait for its reset
        const resetMs = resets.has(p.name) ? big(resets.get(p.name)) : big(p.window) * 1000n;
        this._blockedNs = maxBig(this._blockedNs, nowNs + resetMs * NS_PER_MS);
      }
    }
  }

  /** Nanoseconds until all admit `cost` (null: never). */
  _waitNs(nowNs, cost) {
    let w = maxBig(0n, this._blockedNs - nowNs);
    for (const g of this._policies.values()) {
      if (g.q === 0n) continue; // blocked above until its reset
      const d = g.waitNs(nowNs, cost);
      if (d === null) return null;
      w = maxBig(w, d);
    }
    if (this._window !== null) w = maxBig(w, this._window.waitNs(nowNs, cost));
    return w;
  }

  /**
   * Milliseconds until a request of `cost` would be admitted: 0 now, null never (the cost
   * exceeds an advertised quota). Exact to the nanosecond.
   */
  wait({ now = null, cost = 1 } = {}) {
    const w = this._waitNs(this._nowNs(now), big(cost));
    return w === null ? null : Number(w) / 1e6;
  }

  /**
   * Takes `cost` from every local limit and returns true when all admit it now; else takes
   * nothing and returns false.
   */
  tryAcquire({ now = null, cost = 1 } = {}) {
    const nowNs = this._nowNs(now);
    const c = big(cost);
    if (this._waitNs(nowNs, c) !== 0n) return false;
    for (const g of this._policies.values()) if (g.q !== 0n) g.take(nowNs, c);
    if (this._window !== null) this._window.take(nowNs, c);
    return true;
  }

  /**
   * Waits until `cost` is admitted and takes it: resolves true; false when that would take
   * longer than `timeoutMs`, or never comes. `signal` (an AbortSignal) ends the wait with
   * its abort error; `sleep(ms, signal)` is for tests.
   */
  async acquire({ cost = 1, timeoutMs = null, signal = undefined, sleep = defaultSleep } = {}) {
    const start = this.clock();
    for (;;) {
      const now = this.clock();
      if (this.tryAcquire({ now, cost })) return true;
      const w = this.wait({ now, cost });
      if (w === null || (timeoutMs !== null && now + w > start + timeoutMs)) return false;
      await sleep(w, signal);
    }
  }

  /** A Map of policy name to the units left now, as the local limits see them. */
  remaining({ now = null } = {}) {
    const nowNs = this._nowNs(now);
    const out = new Map();
    for (const [n, g] of this._policies) out.set(n, Number(g.remaining(nowNs)));
    return out;
  }
}

/**
 * Sleeps at least `ms` (timers fire on whole milliseconds: a fraction is rounded up, so the
 * wake-up is never early), or rejects when `signal` aborts.
 */
export function defaultSleep(ms, signal) {
  return sleepMs(Math.max(1, Math.ceil(ms)), undefined, signal ? { signal } : undefined);
}
