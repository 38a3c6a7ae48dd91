// Backoff over many draws with a fixed seed: the bounds hold on every draw, the spread is
// that of the distribution (figures printed), Retry-After is always respected, and the
// deadline gives up.

import assert from 'node:assert/strict';
import { test } from 'node:test';

import { Backoff } from '../src/backoff.js';
import { seededRandom } from '../src/random.js';

const DRAWS = 20000;
const mean = (a) => a.reduce((s, x) => s + x, 0) / a.length;

test('full jitter: bounds, mean and deciles', () => {
  const b = new Backoff({ baseMs: 100, capMs: 3000, deadlineMs: null, random: seededRandom(1) });
  for (let attempt = 0; attempt < 8; attempt++) {
    const ceiling = Math.min(3000, 100 * 2 ** attempt);
    const draws = Array.from({ length: DRAWS }, () => b.delay(attempt));
    assert.ok(draws.every((d) => d >= 0 && d <= ceiling));
    const m = mean(draws);
    console.log(`full jitter attempt ${attempt}: ceiling ${ceiling} ms, mean ${m.toFixed(2)}, `
      + `min ${Math.min(...draws).toFixed(3)}, max ${Math.max(...draws).toFixed(3)}`);
    // uniform(0, c): mean c/2, standard error c/sqrt(12 n) (~0.2% of c here)
    assert.ok(Math.abs(m - ceiling / 2) < 0.02 * ceiling);
    // each tenth of [0, c] gets about a tenth of the draws
    const deciles = new Array(10).fill(0);
    for (const d of draws) deciles[Math.min(9, Math.floor((d / ceiling) * 10))] += 1;
    assert.ok(deciles.every((n) => Math.abs(n - DRAWS / 10) < (DRAWS / 10) * 0.1), String(deciles));
  }
});

test('decorrelated jitter: bounds', () => {
  const b = new Backoff({ baseMs: 50, capMs: 2000, deadlineMs: null, decorrelated: true, random: seededRandom(2) });
  let prev = null;
  const draws = [];
  for (let i = 0; i < DRAWS; i++) {
    const d = b.delay(0, { previousMs: prev });
    const hi = Math.min(2000, 3 * (prev === null ? 50 : Math.max(50, prev)));
    assert.ok(d >= 50 && d <= hi, `${d} outside [50, ${hi}]`);
    draws.push(d);
    prev = d;
  }
  console.log(`decorrelated: mean ${mean(draws).toFixed(2)} ms, min ${Math.min(...draws).toFixed(3)}, `
    + `max ${Math.max(...draws).toFixed(3)}`);
  assert.ok(Math.max(...draws) > 1500); // it does climb towards the cap
});

for (const decorrelated of [false, true]) {
  test(`Retry-After is always respected (decorrelated: ${decorrelated})`, () => {
    const rnd = seededRandom(3);
    const b = new Backoff({ baseMs: 10, capMs: 500, deadlineMs: null, decorrelated, random: seededRandom(4) });
    let previousMs = null;
    for (let i = 0; i < DRAWS; i++) {
      const choices = [0, 1, 300, 1000, 7500, rnd() * 10000];
      const ra = choices[Math.floor(rnd() * choices.length)];
      const d = b.delay(i % 12, { retryAfterMs: ra, previousMs });
      assert.ok(d >= ra, `${d} < ${ra}`); // above the cap when the server says so
      previousMs = d;
    }
  });
}

test('attempts far out do not overflow', () => {
  const b = new Backoff({ baseMs: 100, capMs: 1000, deadlineMs: null, random: seededRandom(5) });
  const d = b.delay(1e6);
  assert.ok(d >= 0 && d <= 1000);
});

test('a schedule gives up at the deadline', () => {
  const c = () => c.t;
  c.t = 0;
  const b = new Backoff({ baseMs: 500, capMs: 500, deadlineMs: 2000, random: seededRandom(6), clock: c });
  const s = b.schedule();
  let slept = 0;
  for (;;) {
    const d = s.next({ now: c.t });
    if (d === null) break;
    c.t += d;
    slept += d;
  }
  assert.ok(slept <= 2000);
  assert.ok(s.attempt >= 4); // full jitter of at most 500 ms: at least four fit in 2 s
  // a Retry-After past the deadline gives up at once
  const s2 = b.schedule(0);
  assert.equal(s2.next({ retryAfterMs: 2500, now: 0 }), null);
  assert.equal(s2.next({ retryAfterMs: 1500, now: 0 }), 1500);
});

test('the same seed gives the same delays', () => {
  const a = new Backoff({ random: seededRandom(9) });
  const b = new Backoff({ random: seededRandom(9) });
  const c = new Backoff({ random: seededRandom(10) });
  const run = (x) => Array.from({ length: 20 }, (_, i) => x.delay(i));
  assert.deepStrictEqual(run(a), run(b));
  assert.notDeepStrictEqual(run(a), run(c));
});

test('bad parameters are refused', () => {
  for (const opts of [{ baseMs: 0 }, { baseMs: 1000, capMs: 500 }, { deadlineMs: -1 }, { baseMs: NaN }]) {
    assert.throws(() => new Backoff(opts), RangeError);
  }
  assert.throws(() => new Backoff().delay(-1), RangeError);
});
