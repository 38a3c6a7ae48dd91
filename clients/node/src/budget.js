// A retry budget: retries at most `ratio` of the first attempts made over a sliding period,
// plus a floor of `minPerSecond` retries a second (so that a client that sends little can
// still retry), as Finagle's and gRPC's budgets do. When a dependency fails, the retries add
// at most that share to its load instead of multiplying it.
//
//   const budget = new RetryBudget({ ratio: 0.1, periodMs: 10000, minPerSecond: 1 });
//   budget.recordAttempt();          // each first attempt
//   if (budget.tryRetry()) ...       // each retry: true (and counted) when the budget allows
//
// Over any span of time no longer than period - period/slots, the retries allowed number at
// most ratio * first attempts + minPerSecond * period. The counts live in `slots` buckets of
// period/slots each: bounded memory whatever the rate. One budget may be shared by every
// request of a process: its methods never await, so no two run interleaved.

import { exactFraction, limitDenominator } from './fraction.js';

const monotonicMs = () => performance.now();

export class RetryBudget {
  /**
   * ratio >= 0 (0.1: a tenth), periodMs > 0, minPerSecond >= 0, slots >= 1; clock in ms.
   * Throws a RangeError otherwise.
   */
  constructor({ ratio = 0.1, periodMs = 10000, minPerSecond = 1, slots = 20, clock = monotonicMs } = {}) {
    if (!(ratio >= 0) || !(periodMs > 0) || !(minPerSecond >= 0) || !(slots >= 1)) {
      throw new RangeError('a retry budget needs ratio >= 0, periodMs > 0, minPerSecond >= 0, slots >= 1');
    }
    this.ratio = ratio;
    this.periodMs = Number(periodMs);
    this.minPerSecond = minPerSecond;
    this.slots = Math.floor(slots);
    this.clock = clock;
    // Exact fractions (0.1 is 1/10): the budget allows retries while
    // retries + 1 <= ratio * firsts + floor, compared over one common denominator.
    const [rn, rd] = limitDenominator(exactFraction(ratio));
    const [mn, md] = limitDenominator(exactFraction(minPerSecond));
    const [pn, pd] = limitDenominator(exactFraction(this.periodMs));
    this._rn = rn * md * pd * 1000n; // ratio, over _den
    this._fn = mn * pn * rd;          // minPerSecond * period in seconds, over _den
    this._den = rd * md * pd * 1000n;
    this._widthMs = this.periodMs / this.slots;
    this._first = new Array(this.slots).fill(0); // first attempts per slot
    this._retry = new Array(this.slots).fill(0); // retries per slot
    this._slot = null;                            // the index (time / width) of the newest slot
  }

  /** Clears the slots that have slid out of the window; the index of the current one. */
  _advance(now) {
    const s = Math.floor(now / this._widthMs);
    if (this._slot === null) {
      this._slot = s;
    } else if (s > this._slot) {
      const last = Math.min(s, this._slot + this.slots);
      for (let k = this._slot + 1; k <= last; k++) {
        const i = ((k % this.slots) + this.slots) % this.slots;
        this._first[i] = 0;
        this._retry[i] = 0;
      }
      this._slot = s;
    }
    return ((this._slot % this.slots) + this.slots) % this.slots;
  }

  /** Counts `n` first attempts (not retries). */
  recordAttempt(n = 1) {
    this._first[this._advance(this.clock())] += n;
  }

  _fits() {
    const firsts = BigInt(sum(this._first));
    const retries = BigInt(sum(this._retry));
    return (retries + 1n) * this._den <= this._rn * firsts + this._fn;
  }

  /** Would a retry be allowed now? (Counts nothing.) */
  canRetry() {
    this._advance(this.clock());
    return this._fits();
  }

  /** True, and the retry counted, when the budget allows one more now. */
  tryRetry() {
    const i = this._advance(this.clock());
    if (!this._fits()) return false;
    this._retry[i] += 1;
    return true;
  }

  /** { firsts, retries } in the window now. */
  counts() {
    this._advance(this.clock());
    return { firsts: sum(this._first), retries: sum(this._retry) };
  }
}

function sum(a) {
  let s = 0;
  for (const v of a) s += v;
  return s;
}
