// sluice-client: a client's half of rate limiting, for Node.js (no runtime dependency).
//
// - backoff:  exponential backoff with full or decorrelated jitter, never before Retry-After
// - budget:   a retry budget (retries at most a share of first attempts, plus a floor)
// - headers:  parse RateLimit-Policy / RateLimit / X-RateLimit-* / Retry-After, CL.THROTTLE
// - limiter:  a client-side GCRA per advertised policy, kept in step with the server
// - fetch:    a fetch that uses the three above
// - resp:     CL.THROTTLE and the SL.* commands through ioredis (import 'sluice-client/resp')

export { Backoff, Schedule } from './backoff.js';
export { RetryBudget } from './budget.js';
export { parse, parseList, parseThrottle, SFError } from './headers.js';
export { Limiter } from './limiter.js';
export { GaveUp, RETRY_STATUSES, wrapFetch } from './fetch.js';
export { seededRandom } from './random.js';
