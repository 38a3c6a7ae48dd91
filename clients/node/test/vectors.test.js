// The shared cases of tests/vectors/ratelimit_headers.json: every case of both sections, the
// parser's whole answer compared with the expectation (whose keys are snake_case: the same
// names in camelCase here). Then the header containers a Node program has, and the RFC 9651
// parser's own edges.

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, test } from 'node:test';

import {
  ByteSeq, Decimal, DisplayString, InnerList, MAX_FIELD_BYTES, SFError, SfDate, Token, parse,
  parseList, parseThrottle,
} from '../src/headers.js';
import { seededRandom } from '../src/random.js';

const VECTORS = new URL('../../../tests/vectors/ratelimit_headers.json', import.meta.url);
// An integer of the table past 2^53 (a clamp to 2^63 - 1) is read as the BigInt the parser
// answers with: JSON.parse would round it to a double.
const BIG = '#bigint#';
const CASES = JSON.parse(
  readFileSync(VECTORS, 'utf8').replace(/([:[,]\s*)(\d{16,})(?=\s*[,\]}])/g, `$1"${BIG}$2"`),
  (_, v) => (typeof v === 'string' && v.startsWith(BIG) ? BigInt(v.slice(BIG.length)) : v));

const camel = (k) => k.replace(/_([a-z])/g, (_, c) => c.toUpperCase());

/** The expectation with its keys in camelCase (values untouched). */
function camelKeys(v) {
  if (Array.isArray(v)) return v.map(camelKeys);
  if (v !== null && typeof v === 'object') {
    return Object.fromEntries(Object.entries(v).map(([k, x]) => [camel(k), camelKeys(x)]));
  }
  return v;
}

describe('headers vectors', () => {
  for (const c of CASES.headers) {
    test(c.name, () => {
      const got = parse(c.headers, { nowMs: c.now_ms });
      assert.deepStrictEqual(got, camelKeys(c.expect));
    });
  }
});

describe('throttle vectors', () => {
  for (const c of CASES.throttle) {
    test(c.name, () => {
      assert.deepStrictEqual(parseThrottle(c.reply), camelKeys(c.expect));
    });
  }
});

test('every section is read', () => {
  assert.ok(CASES.headers.length >= 40 && CASES.throttle.length >= 6);
});

const CONTAINER_CASE = CASES.headers.find((c) => c.name === 'sluiced, a denial with two limits');

describe('header containers give the same answer', () => {
  const pairs = CONTAINER_CASE.headers;
  const want = camelKeys(CONTAINER_CASE.expect);
  const containers = {
    'fetch Headers': () => new Headers(pairs),
    Map: () => new Map(pairs),
    'plain object (IncomingMessage.headers)': () => Object.fromEntries(pairs.map(([n, v]) => [n.toLowerCase(), v])),
    'flat rawHeaders': () => pairs.flat(),
    'Buffer values': () => pairs.map(([n, v]) => [n, Buffer.from(v, 'latin1')]),
  };
  for (const [name, make] of Object.entries(containers)) {
    test(name, () => {
      assert.deepStrictEqual(parse(make(), { nowMs: CONTAINER_CASE.now_ms }), want);
    });
  }
});

test('a list field on two lines joins, in pairs, rawHeaders, an object of arrays and Headers', () => {
  const two = [['RateLimit-Policy', '"a";q=1;w=1'], ['RateLimit-Policy', '"b";q=2;w=2']];
  const headers = new Headers();
  for (const [n, v] of two) headers.append(n, v);
  for (const h of [two, two.flat(), { 'ratelimit-policy': two.map(([, v]) => v) }, headers]) {
    assert.deepStrictEqual(parse(h).policies.map((p) => p.name), ['a', 'b']);
  }
});

test('nothing, or something that is not headers, is no fields', () => {
  const none = { policies: [], limits: [], x: null, retryAfterMs: null };
  for (const h of [null, undefined, [], {}, 42, 'RateLimit: x', [[1, 2]], [['Retry-After']]]) {
    assert.deepStrictEqual(parse(h), none);
  }
});

test(`a value over ${MAX_FIELD_BYTES} bytes is ignored`, () => {
  const member = '"a";q=1;w=1';
  let ok = Array(300).fill(member).join(', ').slice(0, MAX_FIELD_BYTES);
  ok = ok.slice(0, ok.lastIndexOf(','));
  assert.equal(parse([['RateLimit-Policy', ok]]).policies.length, 16);
  const tooLong = Array(400).fill(member).join(', ');
  assert.ok(tooLong.length > MAX_FIELD_BYTES);
  assert.deepStrictEqual(parse([['RateLimit-Policy', tooLong]]).policies, []);
  // bytes, not characters: 2-byte characters in a string that is short in characters
  const wide = `"${'é'.repeat(2100)}";q=1`;
  assert.ok(wide.length < MAX_FIELD_BYTES && Buffer.byteLength(wide) > MAX_FIELD_BYTES);
  assert.deepStrictEqual(parse([['RateLimit-Policy', wide]]).policies, []);
});

test('malformed lists fail the field', () => {
  for (const value of ['(', '"', ':abc', '?2', 'a;', 'a;=1', 'a;q=', '1.', '1.2345', '%"%zz"',
    '@1.5', 'a, ', 'a b', '"\x01"', '-', '(a', '(a b', '1234567890123456', '%"%ff"', 'a;Q=1']) {
    assert.throws(() => parseList(value), SFError, value);
  }
});

test('RFC 9651 items', () => {
  const got = parseList('1, -2, 3.25, "s", tok/x:y, :AQI=:, ?1, ?0, @1700000000, %"f%c3%bc", (a 1);p');
  const values = got.map(([v]) => v);
  assert.deepStrictEqual(values.slice(0, 3), [1, -2, new Decimal('3.25')]);
  assert.equal(values[3], 's');
  assert.deepStrictEqual(values[4], new Token('tok/x:y'));
  assert.deepStrictEqual(values[5], new ByteSeq('AQI='));
  assert.equal(values[6], true);
  assert.equal(values[7], false);
  assert.deepStrictEqual(values[8], new SfDate(1700000000));
  assert.deepStrictEqual(values[9], new DisplayString('f\u00fc'));
  assert.ok(values[10] instanceof InnerList);
  assert.deepStrictEqual([...got[10][1]], [['p', true]]);
  // the last of a repeated key counts, and takes the last place
  assert.deepStrictEqual([...parseList('a;x=1;y=2;x=3')[0][1]], [['y', 2], ['x', 3]]);
  // a key named as an Object property is a key like any other
  assert.deepStrictEqual(parse([['RateLimit', '"a";constructor=1;r=2']]).limits[0].remaining, 2);
});

test('values past 2^53 come back as BigInt, exactly', () => {
  const got = parse([['X-RateLimit-Limit', '9223372036854775807'], ['X-RateLimit-Remaining', '9007199254740993'],
    ['Retry-After', '9007199254740.993'], ['RateLimit', '"a";r=1;t=999999999999999']], { nowMs: 0 });
  assert.equal(got.x.limit, 9223372036854775807n);
  assert.equal(got.x.remaining, 9007199254740993n);
  assert.equal(got.retryAfterMs, 9007199254740993n);
  assert.equal(got.limits[0].resetMs, 999999999999999000n);
  assert.equal(parse([['X-RateLimit-Limit', '9223372036854775808']]).x.limit, null);
  assert.deepStrictEqual(parseThrottle([0n, 16n, 15n, -1n, 2n]),
    { allowed: true, limit: 16, remaining: 15, retryAfterMs: null, resetMs: 2000 });
});

test('random garbage never throws from parse, and fails parseList only with SFError', () => {
  // Values built from the characters that steer an RFC 9651 parser, and a few others.
  const alphabet = ['"', '\\', ';', '=', ',', ' ', '\t', '(', ')', ':', '?', '@', '%', '*', '-', '.',
    '0', '1', '9', 'a', 'q', 'r', 't', 'w', 'A', '/', '+', 'é', '\x00', '\x7f', 'f', 'c', '3'];
  const rnd = seededRandom(31);
  const pick = (a) => a[Math.floor(rnd() * a.length)];
  const names = ['RateLimit-Policy', 'RateLimit', 'X-RateLimit-Limit', 'X-RateLimit-Remaining',
    'X-RateLimit-Reset', 'Retry-After', 'RateLimit-Reset'];
  let lists = 0;
  for (let i = 0; i < 20000; i++) {
    let v = '';
    const n = Math.floor(rnd() * 40);
    for (let k = 0; k < n; k++) v += pick(alphabet);
    try {
      parseList(v);
      lists += 1;
    } catch (e) {
      assert.ok(e instanceof SFError, `${JSON.stringify(v)}: ${e}`);
    }
    const got = parse([[pick(names), v], [pick(names), v]], { nowMs: 1796126400000 });
    assert.ok(Array.isArray(got.policies) && Array.isArray(got.limits));
  }
  console.log(`random values: ${lists} of 20000 were Lists`);
});
