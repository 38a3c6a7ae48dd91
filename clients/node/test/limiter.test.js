// The client-side limiter on a virtual clock, against a slow model that is obviously right:
// a token bucket of capacity q refilled q per w seconds, in exact fractions (BigInts).

import assert from 'node:assert/strict';
import { test } from 'node:test';

import { parse } from '../src/headers.js';
import { Limiter } from '../src/limiter.js';
import { seededRandom } from '../src/random.js';

function parsed({ policy, limit, retryAfter } = {}) {
  const h = [];
  if (policy) h.push(['RateLimit-Policy', policy]);
  if (limit) h.push(['RateLimit', limit]);
  if (retryAfter !== undefined) h.push(['Retry-After', retryAfter]);
  return parse(h, { nowMs: 0 });
}

/** A virtual clock in milliseconds: c.t to read and move it. */
function clock(t = 100000) {
  const c = () => c.t;
  c.t = t;
  return c;
}

const count = (n, f) => {
  let k = 0;
  for (let i = 0; i < n; i++) if (f()) k++;
  return k;
};

test('nothing known admits everything', () => {
  const lim = new Limiter({ clock: clock() });
  assert.equal(lim.wait(), 0);
  assert.equal(count(1000, () => lim.tryAcquire()), 1000);
});

test('exactly r remain, then one interval', () => {
  const c = clock();
  const lim = new Limiter({ clock: c });
  lim.update(parsed({ policy: '"default";q=20;w=1', limit: '"default";r=7;t=1' }));
  assert.deepStrictEqual(lim.remaining(), new Map([['default', 7]]));
  assert.equal(count(50, () => lim.tryAcquire()), 7);
  assert.equal(lim.wait(), 50); // T = 1 s / 20
  c.t += 49;
  assert.ok(!lim.tryAcquire());
  c.t += 1;
  assert.ok(lim.tryAcquire());
});

test('an interval that is not whole nanoseconds (q=7 per 1 s) is kept exactly', () => {
  const lim = new Limiter({ clock: clock(0) });
  lim.update(parsed({ policy: '"p";q=7;w=1', limit: '"p";r=0' }), { now: 0 });
  // the first unit comes back after T = 142857142.857... ns, rounded up to the nanosecond
  assert.equal(lim.wait({ now: 0 }), 142857143 / 1e6);
  assert.ok(!lim.tryAcquire({ now: 142857142 / 1e6 }));
  // over exactly one second, exactly 7 come back (no drift however the time is cut)
  let n = 0;
  for (let t = 0; t < 1e9; t += 1000003) if (lim.tryAcquire({ now: t / 1e6 })) n++;
  if (lim.tryAcquire({ now: 1000 })) n++;
  assert.equal(n, 7);
});

test('a TAT past 2^53 units stays exact (q=1000 per hour, a month on)', () => {
  const month = 30 * 86400 * 1000;
  const lim = new Limiter({ clock: clock(month) });
  lim.update(parsed({ policy: '"h";q=1000;w=3600', limit: '"h";r=0' }));
  // T = 3.6 s; at 1000 units per ns the times are ~2.6e21: BigInt, exact to the unit
  assert.equal(lim.wait(), 3600);
  assert.ok(!lim.tryAcquire({ now: month + 3600 - 1e-6 }));
  assert.ok(lim.tryAcquire({ now: month + 3600 }));
});

test("a 429's Retry-After admits nothing before it", () => {
  const c = clock();
  const lim = new Limiter({ clock: c });
  lim.update(parsed({ policy: '"a";q=100;w=1', limit: '"a";r=50;t=1', retryAfter: '2' }), { status: 429 });
  assert.equal(lim.wait(), 2000);
  c.t += 1999;
  assert.ok(!lim.tryAcquire());
  c.t += 1;
  assert.ok(lim.tryAcquire());
  // on a 200 a Retry-After does not block
  lim.update(parsed({ retryAfter: '30' }), { status: 200 });
  assert.equal(lim.wait(), 0);
});

test('all or nothing', () => {
  const lim = new Limiter({ clock: clock() });
  lim.update(parsed({ policy: '"s";q=10;w=1, "m";q=100;w=60', limit: '"s";r=10;t=0, "m";r=3;t=60' }));
  assert.equal(count(10, () => lim.tryAcquire()), 3);
  // "m" refused the 4th: "s" gave nothing for it
  assert.deepStrictEqual(lim.remaining(), new Map([['s', 7], ['m', 0]]));
  assert.equal(lim.wait(), 600); // m's T = 60 s / 100
});

test('a cost above the quota is never', () => {
  const lim = new Limiter({ clock: clock() });
  lim.update(parsed({ policy: '"a";q=5;w=1', limit: '"a";r=5' }));
  assert.equal(lim.wait({ cost: 6 }), null);
  assert.ok(!lim.tryAcquire({ cost: 6 }));
  assert.ok(lim.tryAcquire({ cost: 5 }));
});

test('a quota of zero waits for the reset', () => {
  const c = clock();
  const lim = new Limiter({ clock: c });
  lim.update(parsed({ policy: '"z";q=0;w=60', limit: '"z";r=0;t=12' }));
  assert.equal(lim.wait(), 12000);
  c.t += 12000;
  assert.ok(lim.tryAcquire());
});

test('X- fields alone give a window', () => {
  const c = clock();
  const lim = new Limiter({ clock: c });
  lim.update(parse([['X-RateLimit-Remaining', '3'], ['X-RateLimit-Reset', '10']], { nowMs: 0 }));
  assert.equal(count(10, () => lim.tryAcquire()), 3);
  assert.equal(lim.wait(), 10000);
  c.t += 10000;
  assert.ok(lim.tryAcquire());
});

test('at most 64 policies are remembered, the least recently advertised forgotten', () => {
  const lim = new Limiter({ clock: clock() });
  for (let i = 0; i < 70; i++) lim.update(parsed({ policy: `"p${i}";q=5;w=1` }));
  const names = [...lim.remaining().keys()];
  assert.equal(names.length, 64);
  assert.equal(names[0], 'p6');
  assert.equal(names[63], 'p69');
});

test('against a token bucket model: every decision and wait equal the model\'s', () => {
  const NS = 1000000000n;
  const rnd = seededRandom(23);
  const randInt = (n) => Math.floor(rnd() * n);
  for (const [q, w] of [[20, 1], [7, 3], [100, 60], [3, 1], [1000, 1]]) {
    const lim = new Limiter({ clock: () => 0 });
    const Q = BigInt(q);
    const W = BigInt(w) * NS;
    let t = 10n * NS;
    const ms = (ns) => Number(ns) / 1e6;
    const policy = `"p";q=${q};w=${w}`;
    lim.update(parsed({ policy, limit: `"p";r=${q}` }), { now: ms(t) });
    // the model: tokens = tn / W (units of 1/W tokens), capacity q
    let tn = Q * W;
    let last = t;
    for (let i = 0; i < 3000; i++) {
      const choices = [0, 1, 999, randInt(Math.floor((w * 1e9) / q) * 2 + 1)];
      t += BigInt(choices[randInt(4)]);
      tn += (t - last) * Q; // (t - last) * q / W tokens
      if (tn > Q * W) tn = Q * W;
      last = t;
      if (rnd() < 0.05) {
        const r = randInt(q + 1);
        lim.update(parsed({ policy, limit: `"p";r=${r}` }), { now: ms(t) });
        tn = BigInt(r) * W;
        continue;
      }
      const cost = [1, 1, 1, 2, q][randInt(5)];
      // the model's wait: until tokens reach cost, rounded up to the nanosecond
      const need = BigInt(cost) * W - tn;
      const want = need <= 0n ? 0n : (need + Q - 1n) / Q;
      const got = lim.wait({ now: ms(t), cost });
      assert.ok(got !== null);
      assert.equal(BigInt(Math.round(got * 1e6)), want, `q=${q} w=${w} t=${t} cost=${cost}`);
      const ok = lim.tryAcquire({ now: ms(t), cost });
      assert.equal(ok, tn >= BigInt(cost) * W);
      if (ok) tn -= BigInt(cost) * W;
    }
  }
});

test('acquire sleeps until admitted, and gives up past its timeout', async () => {
  const c = clock();
  const slept = [];
  const sleep = async (ms) => {
    slept.push(ms);
    c.t += ms;
  };
  const lim = new Limiter({ clock: c });
  lim.update(parsed({ policy: '"a";q=10;w=1', limit: '"a";r=0' }));
  assert.equal(await lim.acquire({ sleep }), true);
  assert.ok(Math.abs(slept.reduce((a, b) => a + b, 0) - 100) < 1e-9);
  assert.equal(await lim.acquire({ sleep, timeoutMs: 50 }), false);
  assert.equal(await lim.acquire({ sleep, cost: 11 }), false);
});

test('acquire on the real clock, and an abort ends its wait', async () => {
  const lim = new Limiter();
  const t0 = performance.now();
  lim.update(parsed({ policy: '"a";q=50;w=1', limit: '"a";r=0' }));
  assert.equal(await lim.acquire(), true);
  // T = 20 ms from the update: the limiter admits on its own clock, never early
  assert.ok(performance.now() - t0 >= 20);
  lim.update(parsed({ policy: '"a";q=1;w=3600', limit: '"a";r=0' }));
  const ac = new AbortController();
  const p = lim.acquire({ signal: ac.signal });
  ac.abort();
  await assert.rejects(p, { name: 'AbortError' });
});
