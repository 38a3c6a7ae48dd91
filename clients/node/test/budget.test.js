// The retry budget on a virtual clock: its floor, its ratio to the unit, its sliding window,
// and its bound over a random trace.

import assert from 'node:assert/strict';
import { test } from 'node:test';

import { RetryBudget } from '../src/budget.js';
import { seededRandom } from '../src/random.js';

function clock(t = 1000000) {
  const c = () => c.t;
  c.t = t;
  return c;
}

const count = (n, f) => {
  let k = 0;
  for (let i = 0; i < n; i++) if (f()) k++;
  return k;
};

test('the floor alone', () => {
  const b = new RetryBudget({ ratio: 0.1, periodMs: 10000, minPerSecond: 1, clock: clock() });
  assert.equal(count(100, () => b.tryRetry()), 10); // minPerSecond * period, no first attempts
});

test('the ratio of first attempts, to the unit', () => {
  const b = new RetryBudget({ ratio: 0.1, periodMs: 10000, minPerSecond: 0, clock: clock() });
  b.recordAttempt(1000);
  assert.equal(count(1000, () => b.tryRetry()), 100);
  assert.ok(!b.canRetry());
  b.recordAttempt(10);
  assert.ok(b.tryRetry() && !b.tryRetry());
  // 0.1 * 3 + 0.3 s * 1/s = 0.6: no whole retry; 0.7 * 3 = 2.1: two (0.1 and 0.7 are not
  // exact doubles, yet neither rounds up to one more)
  const c = new RetryBudget({ ratio: 0.1, periodMs: 300, minPerSecond: 1, clock: clock() });
  c.recordAttempt(3);
  assert.equal(count(5, () => c.tryRetry()), 0);
  const d = new RetryBudget({ ratio: 0.7, periodMs: 10000, minPerSecond: 0, clock: clock() });
  d.recordAttempt(3);
  assert.equal(count(5, () => d.tryRetry()), 2);
});

test('the window slides', () => {
  const c = clock();
  const b = new RetryBudget({ ratio: 0.5, periodMs: 10000, minPerSecond: 0, slots: 10, clock: c });
  b.recordAttempt(100);
  assert.equal(count(100, () => b.tryRetry()), 50);
  c.t += 5000;
  assert.ok(!b.canRetry());
  c.t += 5500; // the first slot has slid out: its attempts and retries are forgotten
  assert.deepStrictEqual(b.counts(), { firsts: 0, retries: 0 });
  assert.ok(!b.canRetry());
  b.recordAttempt(4);
  assert.equal(count(10, () => b.tryRetry()), 2);
});

test('the bound over a random trace', () => {
  // Over any span shorter than period - period/slots, retries <= ratio * firsts + floor.
  const c = clock();
  const rnd = seededRandom(11);
  const b = new RetryBudget({ ratio: 0.2, periodMs: 10000, minPerSecond: 2, slots: 20, clock: c });
  const start = c.t;
  let firsts = 0;
  let retries = 0;
  while (c.t < start + 9400) {
    c.t += -Math.log(1 - rnd()) * 5; // exponential gaps, 200 a second
    if (rnd() < 0.5) {
      b.recordAttempt();
      firsts += 1;
    } else if (b.tryRetry()) {
      retries += 1;
    }
  }
  const bound = 0.2 * firsts + 2 * 10;
  console.log(`budget trace: firsts ${firsts} retries ${retries} bound ${bound.toFixed(1)}`);
  assert.ok(retries <= bound);
  assert.ok(retries >= 0.2 * firsts); // the budget is not stingier than it says (floor aside)
});

test('bad parameters are refused', () => {
  for (const opts of [{ ratio: -1 }, { periodMs: 0 }, { minPerSecond: -1 }, { slots: 0 }, { ratio: NaN }]) {
    assert.throws(() => new RetryBudget(opts), RangeError);
  }
});
