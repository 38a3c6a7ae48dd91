// sluice over the Redis protocol, through ioredis (the caller's: these take an ioredis
// client, and this module imports nothing of ioredis).
//
//   import Redis from 'ioredis';
//   import { throttle } from 'sluice-client/resp';
//   const redis = new Redis(7379, '127.0.0.1');
//   const d = await throttle(redis, 'user:42', 15, 30, 60);   // CL.THROTTLE
//   if (!d.allowed) await sleep(d.retryAfterMs);
//
// CL.THROTTLE's answer comes back in milliseconds (its seconds times 1000); the SL.*
// commands' decisions come back with the server's fields in camelCase (retry_after_ms:
// retryAfterMs), in the server's unit, milliseconds. A server error rejects with ioredis's
// own ReplyError.

import { parseThrottle } from './headers.js';

/** The server answered something that is not the command's reply (Python's ReplyError). */
export class UnexpectedReplyError extends Error {
  constructor(message) {
    super(message);
    this.name = 'UnexpectedReplyError';
  }
}

const show = (v) => {
  try {
    return JSON.stringify(v, (_, x) => (typeof x === 'bigint' ? `${x}n` : Buffer.isBuffer(x) ? x.toString('latin1') : x));
  } catch {
    return String(v);
  }
};

/**
 * CL.THROTTLE key burst rate period quantity: redis-cell's command (a limit of burst + 1,
 * `rate` per `period` seconds). Resolves { allowed, limit, remaining, retryAfterMs, resetMs }
 * (retryAfterMs null when allowed, or when no wait will do: the quantity exceeds the burst);
 * rejects with UnexpectedReplyError on a reply that is not five integers.
 */
export async function throttle(redis, key, burst, rate, period, quantity = 1) {
  const reply = await redis.call('CL.THROTTLE', key, int(burst), int(rate), int(period), int(quantity));
  const t = parseThrottle(reply);
  if (t === null) throw new UnexpectedReplyError(`not a CL.THROTTLE reply: ${show(reply)}`);
  return t;
}

const camel = (k) => k.replace(/_([a-z])/g, (_, c) => c.toUpperCase());

/** A decision's reply as an object: RESP2's flat name/value array, or a map (RESP3). */
function fields(reply) {
  let items;
  if (reply instanceof Map) {
    items = [...reply.entries()];
  } else if (Array.isArray(reply) && reply.length % 2 === 0) {
    items = [];
    for (let i = 0; i < reply.length; i += 2) items.push([reply[i], reply[i + 1]]);
  } else if (reply !== null && typeof reply === 'object' && !Array.isArray(reply) && !Buffer.isBuffer(reply)) {
    items = Object.entries(reply);
  } else {
    throw new UnexpectedReplyError(`not a decision: ${show(reply)}`);
  }
  const out = {};
  for (const [k, v] of items) {
    const name = Buffer.isBuffer(k) ? k.toString() : String(k);
    Object.defineProperty(out, camel(name), { value: Buffer.isBuffer(v) ? v.toString() : v,
      enumerable: true, writable: true, configurable: true });
  }
  if (!Object.hasOwn(out, 'allowed')) throw new UnexpectedReplyError(`a decision without 'allowed': ${show(reply)}`);
  out.allowed = Boolean(Number(out.allowed));
  return out;
}

function int(v) {
  if (typeof v === 'bigint') return v.toString();
  if (!Number.isInteger(v)) throw new TypeError(`an integer is needed (got ${show(v)})`);
  return v;
}

function options({ burst, cost, algorithm } = {}) {
  const args = [];
  if (burst !== undefined && burst !== null) args.push('BURST', int(burst));
  if (cost !== undefined && cost !== null) args.push('COST', int(cost));
  if (algorithm !== undefined && algorithm !== null) args.push('ALGORITHM', algorithm);
  return args;
}

/**
 * SL.TAKE: takes from an ad-hoc limit; resolves the decision's fields ({ allowed (a
 * boolean), limit, remaining, retryAfterMs, resetAfterMs, ... }). `period`: seconds, or a
 * duration ('500ms', '1m'). Options: burst, cost, algorithm.
 */
export async function take(redis, key, limit, period, opts = {}) {
  return fields(await redis.call('SL.TAKE', key, int(limit), period, ...options(opts)));
}

/** SL.PEEK: what take() would answer, consuming nothing. */
export async function peek(redis, key, limit, period, opts = {}) {
  return fields(await redis.call('SL.PEEK', key, int(limit), period, ...options(opts)));
}

/**
 * SL.POLICY: takes from a named policy of the server's config. Options: cost, tokens, tier.
 * The decision adds rejectedBy, scope and binding.
 */
export async function policy(redis, name, key, { cost, tokens, tier } = {}) {
  const args = [];
  if (cost !== undefined && cost !== null) args.push('COST', int(cost));
  if (tokens !== undefined && tokens !== null) args.push('TOKENS', int(tokens));
  if (tier !== undefined && tier !== null) args.push('TIER', tier);
  return fields(await redis.call('SL.POLICY', name, key, ...args));
}

/** SL.RESET: forgets the keys; resolves the number that were held. */
export async function reset(redis, ...keys) {
  return Number(await redis.call('SL.RESET', ...keys));
}

/** SL.ACQUIRE: a concurrency lease id (a string), or null when maxInFlight are held. */
export async function acquire(redis, key, maxInFlight, ttlMs) {
  const reply = await redis.call('SL.ACQUIRE', key, int(maxInFlight), int(ttlMs));
  return Buffer.isBuffer(reply) ? reply.toString() : reply;
}

/** SL.RELEASE: true when the lease was held, false when unknown or expired. */
export async function release(redis, key, leaseId) {
  return Number(await redis.call('SL.RELEASE', key, leaseId)) === 1;
}
