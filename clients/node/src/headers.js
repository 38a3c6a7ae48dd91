// What an HTTP response (or a CL.THROTTLE reply) tells a client about its rate limits.
//
// parse(headers, { nowMs }) reads the IETF fields RateLimit-Policy and RateLimit (RFC 9651
// Lists, parsed here, bounded), the X-RateLimit-* family (or the earlier drafts'
// RateLimit-Limit/-Remaining/-Reset) and Retry-After, exactly as tests/vectors/README.md
// says. Nothing here throws on bad input: a field that cannot be read is ignored as the
// rules say.
//
// parseThrottle(reply) reads the five integers of a CL.THROTTLE reply.
//
// Numbers come back as JavaScript numbers. A value past Number.MAX_SAFE_INTEGER (2^53 - 1,
// which no real server sends: the X-RateLimit-* fields and Retry-After may carry any 64-bit
// integer, RateLimit's t seconds of 15 digits are more milliseconds than that) comes back as
// a BigInt, so that nothing is rounded.

/** A field value longer than this (a list field's after joining its lines) is ignored whole. */
export const MAX_FIELD_BYTES = 4096;
/** At most this many members of RateLimit-Policy and of RateLimit are kept. */
export const MAX_MEMBERS = 16;

const INT64_MAX = (1n << 63n) - 1n;
const INT64_MIN = -(1n << 63n);

// ---------------------------------------------------------------------------------------
// RFC 9651 structured fields: the parts a List needs. Bare items come back as: a number
// (Integer), a string (String), a boolean (Boolean), or one of the classes below.

/** An sf-token (a String is a plain string). */
export class Token {
  constructor(value) { this.value = value; }
  toString() { return this.value; }
}

/** An sf-binary, kept as its base64 text. */
export class ByteSeq {
  constructor(value) { this.value = value; }
  toString() { return this.value; }
}

/** An sf-displaystring, decoded. */
export class DisplayString {
  constructor(value) { this.value = value; }
  toString() { return this.value; }
}

/** An sf-decimal, kept as its text (no client needs its value). */
export class Decimal {
  constructor(text) { this.text = text; }
}

/** An sf-date: seconds since the Unix epoch. */
export class SfDate {
  constructor(seconds) { this.seconds = seconds; }
}

/** An inner list: its items, each an [item, params] pair. */
export class InnerList extends Array {}

/** The field is not a valid structured field: RFC 9651 says to ignore it whole. */
export class SFError extends Error {
  constructor(message) {
    super(message);
    this.name = 'SFError';
  }
}

const isDigit = (c) => c >= '0' && c <= '9' && c.length === 1;
const isLcalpha = (c) => c >= 'a' && c <= 'z' && c.length === 1;
const isAlpha = (c) => c.length === 1 && ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'));
const isTchar = (c) => isAlpha(c) || isDigit(c) || (c.length === 1 && "!#$%&'*+-.^_`|~".includes(c));
const isTokenRest = (c) => isTchar(c) || c === ':' || c === '/';
const isKeyFirst = (c) => isLcalpha(c) || c === '*';
const isKeyRest = (c) => isLcalpha(c) || isDigit(c) || (c.length === 1 && '_-.*'.includes(c));
const isB64 = (c) => isAlpha(c) || isDigit(c) || c === '+' || c === '/' || c === '=';
const isLchex = (c) => isDigit(c) || (c >= 'a' && c <= 'f' && c.length === 1);
const isPrintable = (c) => c >= ' ' && c <= '~';

// A cursor over one field value. Every loop consumes at least one character, so a parse is
// linear in the (bounded) length.
class Reader {
  constructor(s) {
    this.s = s;
    this.i = 0;
    this.n = s.length;
  }

  peek() { return this.i < this.n ? this.s[this.i] : ''; }

  skipSp() { while (this.i < this.n && this.s[this.i] === ' ') this.i++; }

  skipOws() { while (this.i < this.n && (this.s[this.i] === ' ' || this.s[this.i] === '\t')) this.i++; }

  done() { return this.i >= this.n; }
}

function trimOws(s) {
  let a = 0;
  let b = s.length;
  while (a < b && (s[a] === ' ' || s[a] === '\t')) a++;
  while (b > a && (s[b - 1] === ' ' || s[b - 1] === '\t')) b--;
  return s.slice(a, b);
}

/**
 * An RFC 9651 List: an array of [itemOrInnerList, params] pairs, params a Map (of a
 * repeated key the last counts). Throws SFError when `text` is not a List. Leading and
 * trailing spaces and tabs (HTTP's OWS around a field value) are dropped first.
 */
export function parseList(text) {
  const r = new Reader(trimOws(text));
  const members = [];
  while (!r.done()) {
    members.push(r.peek() === '(' ? innerList(r) : item(r));
    r.skipOws();
    if (r.done()) return members;
    if (r.peek() !== ',') throw new SFError(`expected ',' at ${r.i}`);
    r.i++;
    r.skipOws();
    if (r.done()) throw new SFError("a trailing ','");
  }
  return members;
}

function item(r) {
  const value = bareItem(r);
  return [value, params(r)];
}

function innerList(r) {
  r.i++; // '('
  const items = new InnerList();
  while (!r.done()) {
    r.skipSp();
    if (r.peek() === ')') {
      r.i++;
      return [items, params(r)];
    }
    items.push(item(r));
    const c = r.peek();
    if (c !== ' ' && c !== ')') throw new SFError("an inner list's item must be followed by ' ' or ')'");
  }
  throw new SFError('an unterminated inner list');
}

function params(r) {
  const out = new Map();
  while (r.peek() === ';') {
    r.i++;
    r.skipSp();
    const k = key(r);
    let value = true;
    if (r.peek() === '=') {
      r.i++;
      value = bareItem(r);
    }
    out.delete(k); // the last one counts (and takes the last place)
    out.set(k, value);
  }
  return out;
}

function key(r) {
  const start = r.i;
  if (!isKeyFirst(r.peek())) throw new SFError("a key must begin with a lowercase letter or '*'");
  r.i++;
  while (r.i < r.n && isKeyRest(r.s[r.i])) r.i++;
  return r.s.slice(start, r.i);
}

function bareItem(r) {
  const c = r.peek();
  if (c === '') throw new SFError('an item is missing');
  if (c === '-' || isDigit(c)) return number(r);
  if (c === '"') return string(r);
  if (isAlpha(c) || c === '*') return token(r);
  if (c === ':') return bytes(r);
  if (c === '?') return boolean(r);
  if (c === '@') {
    r.i++;
    const v = number(r);
    if (typeof v !== 'number') throw new SFError('a date must be an integer');
    return new SfDate(v);
  }
  if (c === '%') return displayString(r);
  throw new SFError(`no item begins with ${JSON.stringify(c)}`);
}

function number(r) {
  const start = r.i;
  let sign = 1;
  if (r.peek() === '-') {
    sign = -1;
    r.i++;
  }
  if (!isDigit(r.peek())) throw new SFError('a number needs a digit');
  const digitsStart = r.i;
  let dot = -1;
  while (r.i < r.n) {
    const c = r.s[r.i];
    if (isDigit(c)) {
      r.i++;
    } else if (c === '.' && dot < 0) {
      if (r.i - digitsStart > 12) throw new SFError("a decimal's integer part has at most 12 digits");
      dot = r.i;
      r.i++;
    } else {
      break;
    }
    if (dot < 0 && r.i - digitsStart > 15) throw new SFError('an integer has at most 15 digits');
    if (dot >= 0 && r.i - digitsStart > 16) throw new SFError('a decimal has at most 16 characters');
  }
  if (dot < 0) {
    // At most 15 digits: below 2^53, exact as a number.
    const v = sign * Number(r.s.slice(digitsStart, r.i));
    return v === 0 ? 0 : v; // no -0
  }
  const frac = r.i - dot - 1;
  if (frac < 1 || frac > 3) throw new SFError('a decimal has 1 to 3 fractional digits');
  return new Decimal(r.s.slice(start, r.i));
}

function string(r) {
  r.i++; // '"'
  let out = '';
  while (r.i < r.n) {
    const c = r.s[r.i++];
    if (c === '\\') {
      if (r.i >= r.n || (r.s[r.i] !== '"' && r.s[r.i] !== '\\')) {
        throw new SFError("a string escapes only '\"' and '\\'");
      }
      out += r.s[r.i++];
    } else if (c === '"') {
      return out;
    } else if (isPrintable(c)) {
      out += c;
    } else {
      throw new SFError('a string holds printable ASCII only');
    }
  }
  throw new SFError('an unterminated string');
}

function token(r) {
  const start = r.i++;
  while (r.i < r.n && isTokenRest(r.s[r.i])) r.i++;
  return new Token(r.s.slice(start, r.i));
}

function bytes(r) {
  r.i++; // ':'
  const start = r.i;
  while (r.i < r.n && isB64(r.s[r.i])) r.i++;
  if (r.peek() !== ':') throw new SFError("a byte sequence is base64 between ':'");
  const text = r.s.slice(start, r.i);
  r.i++;
  return new ByteSeq(text);
}

function boolean(r) {
  r.i++; // '?'
  const c = r.peek();
  if (c !== '0' && c !== '1') throw new SFError('a boolean is ?0 or ?1');
  r.i++;
  return c === '1';
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

function displayString(r) {
  r.i++; // '%'
  if (r.peek() !== '"') throw new SFError('a display string begins with %"');
  r.i++;
  const out = [];
  while (r.i < r.n) {
    const c = r.s[r.i++];
    if (c === '%') {
      const h = r.s.slice(r.i, r.i + 2);
      if (h.length !== 2 || !isLchex(h[0]) || !isLchex(h[1])) {
        throw new SFError("a display string's %-escape is two lowercase hex digits");
      }
      out.push(parseInt(h, 16));
      r.i += 2;
    } else if (c === '"') {
      try {
        return new DisplayString(utf8.decode(Uint8Array.from(out)));
      } catch {
        throw new SFError('a display string is UTF-8');
      }
    } else if (isPrintable(c)) {
      out.push(c.charCodeAt(0));
    } else {
      throw new SFError('a display string holds printable ASCII only');
    }
  }
  throw new SFError('an unterminated display string');
}

// ---------------------------------------------------------------------------------------
// The fields.

function text(v) {
  if (typeof v === 'string') return v;
  if (v instanceof Uint8Array) return Buffer.from(v.buffer, v.byteOffset, v.byteLength).toString('latin1');
  return null;
}

/**
 * [lowercased name, value] for every field line of `headers`, in order. Takes a fetch
 * Headers (or anything with entries(), a Map), an array of [name, value] pairs, a flat
 * array of names and values (node's rawHeaders), or a plain object whose values are strings
 * or arrays of strings (node's IncomingMessage.headers). Values may be Buffers (latin1).
 */
function lines(headers) {
  if (headers === null || headers === undefined) return [];
  let pairs;
  if (Array.isArray(headers)) {
    if (headers.length > 0 && !Array.isArray(headers[0])) {
      pairs = [];
      for (let i = 0; i + 1 < headers.length; i += 2) pairs.push([headers[i], headers[i + 1]]);
    } else {
      pairs = headers;
    }
  } else if (typeof headers.entries === 'function') {
    pairs = headers.entries();
  } else if (typeof headers === 'object') {
    pairs = Object.entries(headers);
  } else {
    return [];
  }
  const out = [];
  for (const pair of pairs) {
    if (!Array.isArray(pair) || pair.length !== 2) continue;
    const name = text(pair[0]);
    if (name === null) continue;
    const values = Array.isArray(pair[1]) ? pair[1] : [pair[1]];
    for (const v of values) {
      const t = text(v);
      if (t !== null) out.push([name.toLowerCase(), t]);
    }
  }
  return out;
}

/** The lines of a list field joined with ', ', or null when absent. */
function listField(ls, name) {
  const vals = ls.filter(([n]) => n === name).map(([, v]) => v);
  return vals.length ? vals.join(', ') : null;
}

/** The first line of a single-valued field, or null when absent. */
// The first line of a single-valued field, or null when absent; '' (invalid, as every
// reader takes it) when longer than MAX_FIELD_BYTES.
function singleField(ls, name) {
  for (const [n, v] of ls) {
    if (n === name) return Buffer.byteLength(v, 'utf8') > MAX_FIELD_BYTES ? '' : v;
  }
  return null;
}

/** The items of a list field as [item, params]; [] when absent, too long or invalid. */
function members(value) {
  if (value === null || Buffer.byteLength(value, 'utf8') > MAX_FIELD_BYTES) return [];
  try {
    return parseList(value).filter(([it]) => !(it instanceof InnerList));
  } catch (e) {
    if (e instanceof SFError) return [];
    throw e;
  }
}

const isInt = (v) => typeof v === 'number';
const nameOf = (it) => (typeof it === 'string' ? it : it instanceof Token ? it.value : null);

/** [ok, unit]: `qu` absent, or a String or Token. */
function optUnit(ps) {
  if (!ps.has('qu')) return [true, null];
  const u = nameOf(ps.get('qu'));
  return u === null ? [false, null] : [true, u];
}

function optPartition(ps) {
  if (!ps.has('pk')) return [true, null];
  const v = ps.get('pk');
  return v instanceof ByteSeq ? [true, v.value] : [false, null];
}

function policies(value) {
  const out = [];
  for (const [it, ps] of members(value)) {
    if (out.length === MAX_MEMBERS) break;
    let name;
    let quota;
    if (isInt(it)) { // the earlier drafts: the item is the quota
      name = null;
      quota = it;
    } else {
      name = nameOf(it);
      quota = ps.get('q');
      if (name === null) continue;
    }
    if (!isInt(quota) || quota < 0) continue;
    const window = ps.has('w') ? ps.get('w') : null;
    if (ps.has('w') && (!isInt(window) || window <= 0)) continue;
    const [okU, unit] = optUnit(ps);
    const [okP, partition] = optPartition(ps);
    if (okU && okP) out.push({ name, quota, window, unit, partition });
  }
  return out;
}

function limits(value) {
  const out = [];
  for (const [it, ps] of members(value)) {
    if (out.length === MAX_MEMBERS) break;
    const name = nameOf(it);
    const r = ps.get('r');
    if (name === null || !isInt(r) || r < 0) continue;
    let resetMs = null;
    if (ps.has('t')) {
      const t = ps.get('t');
      if (!isInt(t) || t < 0) continue;
      resetMs = num(BigInt(t) * 1000n); // t has at most 15 digits: t * 1000 may pass 2^53
    }
    const [okP, partition] = optPartition(ps);
    if (okP) out.push({ name, remaining: r, resetMs, partition });
  }
  return out;
}

const allDigits = (s) => s !== '' && /^[0-9]+$/.test(s);

/** A BigInt as a number when that is exact, else the BigInt itself. */
function num(v) {
  return v <= BigInt(Number.MAX_SAFE_INTEGER) && v >= -BigInt(Number.MAX_SAFE_INTEGER) ? Number(v) : v;
}

/**
 * An integer that fits 64 bits, as a BigInt, or null. With `leading`, the digits at the
 * start of the (trimmed) value, whatever follows them.
 */
function int64(value, leading = false) {
  const s = trimOws(value);
  const neg = s.startsWith('-');
  let body = neg ? s.slice(1) : s;
  if (leading) {
    let n = 0;
    while (n < body.length && isDigit(body[n])) n++;
    body = body.slice(0, n);
  }
  if (!allDigits(body) || body.length > 20) return null;
  const v = neg ? -BigInt(body) : BigInt(body);
  return v >= INT64_MIN && v <= INT64_MAX ? v : null;
}

/**
 * A non-negative number with an optional fraction, as whole milliseconds rounded up
 * (units of 1/1000 of the number), a BigInt, or null. The integer part must fit 64 bits.
 */
function decimalMs(value) {
  const s = trimOws(value);
  const dotAt = s.indexOf('.');
  const whole = dotAt < 0 ? s : s.slice(0, dotAt);
  const frac = dotAt < 0 ? '' : s.slice(dotAt + 1);
  if (!allDigits(whole) || whole.length > 19 || (dotAt >= 0 && !allDigits(frac))) return null;
  const w = BigInt(whole);
  if (w > INT64_MAX) return null;
  let ms = w * 1000n + (frac ? BigInt(frac.slice(0, 3).padEnd(3, '0')) : 0n);
  if (/[1-9]/.test(frac.slice(3))) ms += 1n; // a fraction of a millisecond rounds up
  return ms;
}

const max0 = (v) => (v < 0n ? 0n : v);

/**
 * X-RateLimit-Reset: seconds from now, or a Unix epoch in seconds (>= 10^9) or in
 * milliseconds (>= 10^12); as milliseconds from now (a BigInt), a past time 0.
 */
function resetMs(value, nowMs) {
  const thousandths = decimalMs(value);
  if (thousandths === null) return null;
  if (thousandths >= 10n ** 15n) { // milliseconds since the epoch (thousandths of one)
    const at = (thousandths + 999n) / 1000n;
    return max0(at - nowMs);
  }
  if (thousandths >= 10n ** 12n) return max0(thousandths - nowMs); // seconds since the epoch
  return thousandths;
}

const WKDAY = ['Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat', 'Sun'];
const WEEKDAY = ['Monday', 'Tuesday', 'Wednesday', 'Thursday', 'Friday', 'Saturday', 'Sunday'];
const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];
const MON = `(${MONTHS.join('|')})`;
const TIME = '([0-9]{2}):([0-9]{2}):([0-9]{2})';
const IMF = new RegExp(`^(?:${WKDAY.join('|')}), ([0-9]{2}) ${MON} ([0-9]{4}) ${TIME} GMT$`);
const RFC850 = new RegExp(`^(?:${WEEKDAY.join('|')}), ([0-9]{2})-${MON}-([0-9]{2}) ${TIME} GMT$`);
const ASCTIME = new RegExp(`^(?:${WKDAY.join('|')}) ${MON} ( [0-9]|[0-9]{2}) ${TIME} ([0-9]{4})$`);

/** Days since 1970-01-01 of a proleptic Gregorian date (integer arithmetic). */
function daysFromCivil(y, m, d) {
  y -= m <= 2 ? 1 : 0;
  const era = Math.floor(y / 400);
  const yoe = y - era * 400;
  const doy = Math.floor((153 * (m + (m > 2 ? -3 : 9)) + 2) / 5) + d - 1;
  const doe = yoe * 365 + Math.floor(yoe / 4) - Math.floor(yoe / 100) + doy;
  return era * 146097 + doe - 719468;
}

function monthDays(y, m) {
  if (m === 2) return (y % 4 === 0 && y % 100 !== 0) || y % 400 === 0 ? 29 : 28;
  return [4, 6, 9, 11].includes(m) ? 30 : 31;
}

/** An HTTP-date in any of RFC 9110's three forms, as Unix milliseconds, or null. */
function httpDateMs(value) {
  let day; let mon; let year; let hh; let mm; let ss;
  let m = IMF.exec(value);
  if (m) {
    [, day, mon, year, hh, mm, ss] = m;
  } else if ((m = RFC850.exec(value))) {
    let yy;
    [, day, mon, yy, hh, mm, ss] = m;
    year = (Number(yy) < 70 ? '20' : '19') + yy;
  } else if ((m = ASCTIME.exec(value))) {
    [, mon, day, hh, mm, ss, year] = m;
  } else {
    return null;
  }
  const y = Number(year);
  const mo = MONTHS.indexOf(mon) + 1;
  const d = Number(day.trim());
  const [h, mi, s] = [Number(hh), Number(mm), Number(ss)];
  if (d < 1 || d > monthDays(y, mo) || h > 23 || mi > 59 || s > 60) return null;
  return BigInt(((daysFromCivil(y, mo, d) * 24 + h) * 60 + mi) * 60) * 1000n + BigInt(s * 1000);
}

function retryAfterMs(value, nowMs) {
  const s = trimOws(value);
  if (isDigit(s.slice(0, 1))) {
    const ms = decimalMs(s);
    return ms === null || ms <= INT64_MAX ? ms : INT64_MAX;
  }
  const at = httpDateMs(s);
  return at === null ? null : max0(at - nowMs);
}

function xFields(ls, nowMs, prefix) {
  const raw = ['limit', 'remaining', 'reset'].map((n) => singleField(ls, prefix + n));
  if (raw.every((v) => v === null)) return null;
  const limit = raw[0] === null ? null : int64(raw[0], true);
  let remaining = raw[1] === null ? null : int64(raw[1]);
  if (remaining !== null && remaining < 0n) remaining = 0n;
  const reset = raw[2] === null ? null : resetMs(raw[2], nowMs);
  const n = (v) => (v === null ? null : num(v));
  return { limit: n(limit), remaining: n(remaining), resetMs: n(reset) };
}

/**
 * Reads a response's rate limit fields. `headers`: see lines() above; `nowMs` the
 * receiving clock in Unix milliseconds (a number or a BigInt; default Date.now()), for the
 * fields that give a date. Returns { policies, limits, x, retryAfterMs }:
 *   policies: [{ name, quota, window, unit, partition }]  (RateLimit-Policy)
 *   limits:   [{ name, remaining, resetMs, partition }]   (RateLimit)
 *   x:        { limit, remaining, resetMs } or null       (X-RateLimit-*, RateLimit-*)
 *   retryAfterMs: Retry-After in ms, or null
 * Never throws on bad field values.
 */
export function parse(headers, { nowMs = Date.now() } = {}) {
  const now = typeof nowMs === 'bigint' ? nowMs : BigInt(Math.floor(nowMs));
  const ls = lines(headers);
  let x = xFields(ls, now, 'x-ratelimit-');
  if (x === null) x = xFields(ls, now, 'ratelimit-');
  const ra = singleField(ls, 'retry-after');
  const raMs = ra === null ? null : retryAfterMs(ra, now);
  return {
    policies: policies(listField(ls, 'ratelimit-policy')),
    limits: limits(listField(ls, 'ratelimit')),
    x,
    retryAfterMs: raMs === null ? null : num(raMs),
  };
}

const isInteger = (v) => Number.isInteger(v) || typeof v === 'bigint';
const asNum = (v) => (typeof v === 'bigint' ? num(v) : v);
const seconds = (v) => num(BigInt(v) * 1000n);

/**
 * A CL.THROTTLE reply ([limited, limit, remaining, retry_after, reset], seconds) as
 * { allowed, limit, remaining, retryAfterMs, resetMs } (retryAfterMs null when no wait is
 * said: allowed, or never), or null when it is not one (not five integers, or `limited` not
 * 0 or 1).
 */
export function parseThrottle(reply) {
  if (!Array.isArray(reply) || reply.length !== 5 || !reply.every(isInteger)) return null;
  const [limited, limit, remaining, retryAfter, reset] = reply;
  if (limited != 0 && limited != 1) return null; // eslint-disable-line eqeqeq -- 1 or 1n
  return {
    allowed: limited == 0, // eslint-disable-line eqeqeq
    limit: asNum(limit),
    remaining: asNum(remaining),
    retryAfterMs: retryAfter < 0 ? null : seconds(retryAfter),
    resetMs: reset < 0 ? 0 : seconds(reset),
  };
}
