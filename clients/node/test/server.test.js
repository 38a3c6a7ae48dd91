// The client against a real sluiced (started here on free 127.0.0.1 ports, stopped by its
// PID): fetch paced by the limiter and retried by the backoff, the ioredis helpers, and the
// figures of issue 23 (printed): clients that want four times their limit, with the client
// half and without, and a retry budget while the server refuses everything.

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import { Redis } from 'ioredis';

import { Backoff } from '../src/backoff.js';
import { RetryBudget } from '../src/budget.js';
import { GaveUp, wrapFetch } from '../src/fetch.js';
import { parse } from '../src/headers.js';
import { Limiter } from '../src/limiter.js';
import { seededRandom } from '../src/random.js';
import { UnexpectedReplyError, acquire, peek, policy, release, reset, take, throttle } from '../src/resp.js';
import { Sluiced } from './sluiced.js';

const pause = (ms) => new Promise((r) => setTimeout(r, Math.max(0, ms)));
const drain = async (r) => {
  await r.arrayBuffer();
  return r;
};

describe('one sluiced', () => {
  let s;
  let redis;
  before(async () => {
    s = new Sluiced();
    const config = s.writeFile('sluice.yaml', [
      'policies:',
      '  api:',
      '    limit: 2',
      '    period: 1m',
      '    tiers:',
      '      paid: {limit: 5, period: 1m}',
      '',
    ].join('\n'));
    s.args = ['--config', config];
    await s.start();
    redis = new Redis({ host: '127.0.0.1', port: s.port, enableReadyCheck: false, maxRetriesPerRequest: 1 });
  });
  after(async () => {
    redis?.disconnect();
    await s?.stop();
  });

  test('fetch paced by the limiter is never refused', async () => {
    const lim = new Limiter();
    const f = wrapFetch({ limiter: lim });
    const url = s.checkUrl('node:paced', 5, '1s');
    const statuses = [];
    const t0 = performance.now();
    for (let i = 0; i < 12; i++) statuses.push((await drain(await f(url))).status);
    const took = performance.now() - t0;
    // The first answer teaches the limiter q=5;w=1: 5 at once (the first taught it), then
    // one each 200 ms.
    assert.deepStrictEqual(statuses, Array(12).fill(200));
    assert.ok(took >= 1000, `${took}`);
  });

  test('fetch without the limiter answers the 429, with its Retry-After', async () => {
    const f = wrapFetch();
    const url = s.checkUrl('node:plain', 1, '1h');
    assert.equal((await drain(await f(url))).status, 200);
    const r = await drain(await f(url));
    assert.equal(r.status, 429);
    assert.ok(parse(r.headers).retryAfterMs >= 1000);
  });

  test('a 429 blocks the limiter until Retry-After: GaveUp within the deadline', async () => {
    const url = s.checkUrl('node:blocked', 1, '1h');
    const lim = new Limiter();
    await drain(await wrapFetch({ limiter: lim })(url));
    // the limiter knows q=1;w=3600 and r=0: nothing for an hour, past the deadline
    await assert.rejects(wrapFetch({ limiter: lim, backoff: new Backoff({ deadlineMs: 1000 }) })(url), GaveUp);
    assert.ok(lim.wait() > 3000000);
  });

  test('a 429 is retried after the backoff, never before Retry-After', async () => {
    const url = s.checkUrl('node:retry', 1, '1s');
    const slept = [];
    const sleep = (ms) => {
      slept.push(ms);
      return pause(Math.ceil(ms));
    };
    let sent = 0;
    const counting = (input, init) => {
      sent += 1;
      return fetch(input, init);
    };
    const f = wrapFetch({ backoff: new Backoff({ baseMs: 10, capMs: 50, deadlineMs: 5000, random: seededRandom(1) }),
      fetch: counting, sleep });
    assert.equal((await drain(await f(url))).status, 200);
    const r = await drain(await f(url));
    // refused once with Retry-After: 1, then admitted: the sleep was the server's second
    assert.equal(r.status, 200);
    assert.equal(sent, 3);
    assert.equal(slept.length, 1);
    assert.ok(slept[0] >= 1000, `${slept}`);
  });

  test('fetch with the limiter and the backoff: every answer a 200', async () => {
    const lim = new Limiter();
    const f = wrapFetch({ limiter: lim, backoff: new Backoff({ baseMs: 10, capMs: 200, deadlineMs: 5000, random: seededRandom(1) }) });
    const url = s.checkUrl('node:both', 2, '1s');
    const codes = [];
    for (let i = 0; i < 6; i++) codes.push((await drain(await f(new Request(url)))).status);
    assert.deepStrictEqual(codes, Array(6).fill(200));
    assert.ok(lim.remaining().get('default') <= 2);
  });

  test('the ioredis helpers', async () => {
    let d = await throttle(redis, 'node:cell', 1, 1, 60);
    assert.deepStrictEqual([d.allowed, d.limit, d.remaining, d.retryAfterMs], [true, 2, 1, null]);
    await throttle(redis, 'node:cell', 1, 1, 60);
    d = await throttle(redis, 'node:cell', 1, 1, 60);
    assert.ok(!d.allowed && d.retryAfterMs > 0);

    // a peek answers what a take would, consuming nothing
    const p = await peek(redis, 'node:take', 3, '1m');
    assert.deepStrictEqual([p.allowed, p.limit, p.remaining], [true, 3, 2]);
    let t = await take(redis, 'node:take', 3, '1m', { cost: 2 });
    assert.deepStrictEqual([t.allowed, t.remaining, t.retryAfterMs], [true, 1, 0]);
    t = await take(redis, 'node:take', 3, '1m', { cost: 2 });
    assert.equal(t.allowed, false);
    assert.ok(t.retryAfterMs > 0 && t.resetAfterMs > 0);
    t = await take(redis, 'node:tb', 10, 60, { burst: 2, algorithm: 'token_bucket' });
    assert.deepStrictEqual([t.allowed, t.limit, t.remaining], [true, 2, 1]);

    const a = await policy(redis, 'api', 'u1');
    assert.deepStrictEqual([a.allowed, a.limit, a.remaining, a.rejectedBy, a.scope, a.binding],
      [true, 2, 1, -1, 'key', 'api']);
    const b = await policy(redis, 'api', 'u1', { tier: 'paid', cost: 2 });
    assert.deepStrictEqual([b.allowed, b.limit], [true, 5]);
    await assert.rejects(policy(redis, 'nope', 'u1'), /unknown policy/);

    assert.equal(await reset(redis, 'node:take', 'node:cell', 'node:never'), 2);
    assert.equal((await peek(redis, 'node:take', 3, '1m', { cost: 0 })).remaining, 3);

    const lease = await acquire(redis, 'node:lease', 1, 30000);
    assert.match(lease, /^[0-9a-f]{24}$/);
    assert.equal(await acquire(redis, 'node:lease', 1, 30000), null);
    assert.equal(await release(redis, 'node:lease', lease), true);
    assert.equal(await release(redis, 'node:lease', lease), false);

    // a reply that is not the command's
    const fake = { call: async () => ['0', 16, 15, -1, 2] };
    await assert.rejects(throttle(fake, 'k', 1, 1, 1), UnexpectedReplyError);
    await assert.rejects(take({ call: async () => [1, 2, 3] }, 'k', 1, 1), UnexpectedReplyError);
  });
});

// ---- the figures ----

const LIMIT = 10; // per second, per client (each its own key, as an API key is)
const WANT = 4 * LIMIT; // what each client would send
const CLIENTS = 20;
const SECONDS = 8;

/**
 * CLIENTS clients, each sending at WANT a second for SECONDS on its own key, through fetch
 * (with the client half when paced). The times of the admitted requests per client, and
 * what the server decided meanwhile.
 */
async function runClients(s, prefix, paced) {
  const before = await s.decisions();
  const start = performance.now();
  const end = start + SECONDS * 1000;
  const admitted = Array.from({ length: CLIENTS }, () => []);
  const client = async (i) => {
    const f = paced
      ? wrapFetch({ limiter: new Limiter(),
        backoff: new Backoff({ baseMs: 20, capMs: 1000, deadlineMs: 5000, random: seededRandom(i) }),
        budget: new RetryBudget({ ratio: 0.1, periodMs: 10000, minPerSecond: 1 }) })
      : fetch;
    const url = s.checkUrl(`${prefix}:${i}`, LIMIT, '1s');
    let next = performance.now();
    for (;;) {
      const now = performance.now();
      if (now >= end) break;
      if (next > now) await pause(next - now);
      next += 1000 / WANT;
      let r;
      try {
        r = await drain(await f(url));
      } catch (e) {
        if (e instanceof GaveUp) continue;
        throw e;
      }
      if (r.status === 200) admitted[i].push(performance.now() - start);
    }
  };
  await Promise.all(Array.from({ length: CLIENTS }, (_, i) => client(i)));
  const afterward = await s.decisions();
  return { admitted, allowed: afterward.allowed - before.allowed, rejected: afterward.rejected - before.rejected };
}

/**
 * A client's admitted rate: what it got past the burst (LIMIT, which a key starts with and,
 * after a stall of a second, may hold again), over the run.
 */
const steadyRate = (times) => (times.length - LIMIT) / SECONDS;

describe('the figures', () => {
  test(`${CLIENTS} clients wanting ${WANT}/s on limits of ${LIMIT}/s: with the client half the server refuses < 5%`, async () => {
    const s = await new Sluiced(['--threads', '2']).start();
    try {
      const paced = await runClients(s, 'paced', true);
      const share = paced.rejected / (paced.allowed + paced.rejected);
      const rates = paced.admitted.map(steadyRate);
      const total = rates.reduce((a, b) => a + b, 0);
      console.log(`with the client half: ${CLIENTS} clients wanting ${WANT}/s each, limit ${LIMIT}/s each: `
        + `server refused ${(100 * share).toFixed(2)}% of ${paced.allowed + paced.rejected} requests; `
        + `admitted ${total.toFixed(1)}/s in all (limit ${CLIENTS * LIMIT}), per client `
        + `${Math.min(...rates).toFixed(1)} to ${Math.max(...rates).toFixed(1)}/s`);
      const plain = await runClients(s, 'plain', false);
      const pShare = plain.rejected / (plain.allowed + plain.rejected);
      console.log(`without it: server refused ${(100 * pShare).toFixed(2)}% of ${plain.allowed + plain.rejected} `
        + `requests; admitted ${plain.admitted.map(steadyRate).reduce((a, b) => a + b, 0).toFixed(1)}/s in all`);
      assert.ok(share < 0.05, `refused ${share}`);
      assert.ok(Math.abs(total - CLIENTS * LIMIT) <= 0.05 * CLIENTS * LIMIT, `admitted ${total}/s`);
      for (const r of rates) assert.ok(Math.abs(r - LIMIT) <= 0.05 * LIMIT * 2, String(rates)); // each within 10%
      // How much the plain clients offer is up to this machine; whatever it is, the server
      // refuses what passes the limits, and admits no more.
      assert.ok(plain.rejected > 0 && pShare > 10 * share, 'without it the clients are refused');
      assert.ok(plain.allowed <= CLIENTS * LIMIT * (SECONDS + 2));
    } finally {
      await s.stop();
    }
  });

  test('a retry budget bounds the retries of an outage', async () => {
    // cost 2 on a limit of 1 is refused every time, with no Retry-After (no wait would do):
    // the backoff alone would retry each first attempt until its deadline; the budget lets
    // at most ratio * first attempts + the floor through. The budget's window (20 s) is
    // longer than the run: its bound holds over any span shorter than the window.
    const s = await new Sluiced(['--threads', '2']).start();
    const [ratio, floor, period, clients, seconds] = [0.1, 0.2, 20, 5, 10];
    const run = async (withBudget) => {
      const before = await s.decisions();
      const firsts = new Array(clients).fill(0);
      const end = performance.now() + seconds * 1000;
      const client = async (i) => {
        const budget = withBudget ? new RetryBudget({ ratio, periodMs: period * 1000, minPerSecond: floor }) : null;
        const f = wrapFetch({ backoff: new Backoff({ baseMs: 5, capMs: 50, deadlineMs: 500, random: seededRandom(i) }), budget });
        const url = s.checkUrl(`outage:${i}`, 1, '10s', 2);
        while (performance.now() < end) {
          firsts[i] += 1;
          assert.equal((await drain(await f(url))).status, 429);
        }
      };
      await Promise.all(Array.from({ length: clients }, (_, i) => client(i)));
      const afterward = await s.decisions();
      assert.equal(afterward.allowed, before.allowed, 'nothing was admitted');
      return { first: firsts.reduce((a, b) => a + b, 0), total: afterward.rejected - before.rejected };
    };
    try {
      const { first, total } = await run(true);
      const bound = (1 + ratio) * first + clients * floor * period;
      console.log(`retry budget ${100 * ratio}% + ${floor}/s, ${clients} clients, ${seconds} s of refusals: `
        + `${first} first attempts, ${total} requests in all (bound ${bound.toFixed(0)})`);
      const plain = await run(false);
      console.log(`without a budget: ${plain.first} first attempts, ${plain.total} requests in all `
        + `(${(plain.total / plain.first).toFixed(1)}x)`);
      assert.ok(total <= bound, `${total} > ${bound}`);
      assert.ok(plain.total > 2 * plain.first, 'without the budget the backoff retries each many times');
    } finally {
      await s.stop();
    }
  });
});
