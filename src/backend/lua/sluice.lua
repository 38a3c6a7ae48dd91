-- sluice.lua: SL.DECIDE as one Lua script, for a Redis that cannot load
-- sluice-redis.so. sluiced's central store (--store redis://) sends it as
--
--   EVALSHA <sha> numkeys key [key ...] op lease [group ...]
--
-- with the arguments and the replies of SL.DECIDE (docs/commands.md): op is
-- TAKE, PEEK, RESET, ACQUIRE, RELEASE, REFUND or CHARGE; lease 16 hex digits for
-- ACQUIRE and RELEASE, else "0"; one group of 8 arguments per key (none for
-- RESET): algorithm a b c cost months utc_offset_ns flags (bit 0 carried,
-- flags / 256 the reset day of windows of months, 0 for the first).
--
-- The arithmetic is src/algo/*.c's, ported: the same decisions, the same
-- errors. Redis's clock decides (TIME, whole microseconds), and every
-- duration answered is in nanoseconds. Lua in Redis has only doubles, which
-- hold integers exactly below 2^53: so a time is kept as whole Unix
-- microseconds plus the nanoseconds beyond them (a "pair"), and GCRA's
-- theoretical arrival time also keeps the fraction of a nanosecond that a
-- rate such as 7 a second leaves, so that no take ever rounds a unit away.
-- Durations stay exact while they stay below 2^53 ns (104 days), and so do
-- the buckets' sums, kept in units of 1/D ns where D = limit / gcd(limit,
-- period_ns) is the rate's denominator, while burst * period_ns / gcd stays
-- below 2^53 (7 a second and 1000 a day do; 999 983 a day does not). Limits
-- and counts are exact below 2^53. Beyond, numbers round to the nearest
-- double.
--
-- A key holds its state as text, "sluice.lua/1 <algorithm> <limit> <period>
-- <fields...>", where limit and period name the carried limit that wrote it
-- ("-" for an ad-hoc one), and expires (PXAT) when the state is "never seen"
-- again. A value without that prefix (a string of the application's, the
-- module's binary states, another type) is WRONGTYPE and is never written.
--
-- Op SYNC is the sync strategy's central command, SL.SYNC (src/algo/quota.h
-- is its specification), one key at a time:
--
--   EVALSHA <sha> 1 key SYNC 0 algorithm limit period_ns burst interval_ns
--           nodes node admitted asked length_ns carry [AT unix_ns]
--
-- answered {hold, rate, remaining} in sub-units (65536 a unit), as
-- sl_quota_sync answers, exactly: its products (up to 2^115 here) are kept
-- as wide integers, exact at any size, and its times (Unix nanoseconds, up
-- to SL_TIME_MAX = 2^62 - 1) as pairs of seconds and nanoseconds. Where a
-- value must be a double, the script takes less than SL.SYNC, and its
-- errors name its own ranges:
--
--   limit, burst, admitted   at most 137438953471 (2^37 - 1; SL.SYNC: 2^44),
--                            so that a budget in sub-units, and a charge,
--                            stays below 2^53
--   period_ns, interval_ns,  at most 9007199254740991 (2^53 - 1; SL.SYNC:
--   length_ns                2^61 - 1)
--
-- and the others SL.SYNC's: nodes 1 to 16, node 0 to nodes - 1, asked from
-- admitted to 2^44, carry 0 to 65536, AT 0 to SL_TIME_MAX (without AT,
-- TIME decides, in whole microseconds). The deepest debt the central
-- records is 2^53 sub-units, the deepest a double holds exactly (the C's is
-- 2^61): a sync that would go deeper records -2^53, and from there the two
-- answer otherwise. Within these ranges, nothing else differs.
--
-- A sync's key holds "sluice.lua/1 sync" and the 85 fields of
-- sl_quota_central in the record's order (seen first remaining anchor frac,
-- then synced_at demand hold rate carry for each of 16 slots), as decimal
-- integers, times in Unix nanoseconds. It expires (PXAT) when the record
-- is as good as never seen (sync_expiry says when). A value that is not
-- such a record is WRONGTYPE for SYNC, and a sync record is WRONGTYPE for
-- every other op but RESET, which deletes it as any state of the script's.

local PREFIX = 'sluice.lua/1 '
local NEVER = math.huge             -- a retry that no wait will ever do
local SPAN_MAX = 2305843009213693951 -- sluice.h's SL_SPAN_MAX (2^61 - 1; the double is 2^61)
-- sluice.h's SL_TIME_MAX (2^62 - 1 ns) as whole microseconds and the nanoseconds beyond
local TIME_MAX_US, TIME_MAX_NS = 4611686018427387, 903
local SPAN_MAX_TEXT = '2305843009213693951'
local NS_PER_DAY = 86400000000000
local US_PER_DAY = 86400000000
local MONTHS_MAX = 876
local UTC_OFFSET_MAX = 18 * 3600 * 1000000000
local BIG_MAX = 65536               -- sliding_log's and concurrency's largest limit

local ERRORS = {
  limit = 'ERR limit must be a positive integer of at most 2305843009213693951 ' ..
          '(65536 for sliding_log)',
  period = 'ERR period must be positive and at most 73 years',
  burst = 'ERR burst must be a positive integer of at most 2305843009213693951 ' ..
          '(omit it for a burst of the limit)',
  cost = 'ERR cost must be a non-negative integer',
  overflow = 'ERR burst * period / limit is too large: at most 73 years',
  algorithm = 'ERR unknown algorithm',
  rate = 'ERR rate is too high: less than one microsecond per request',
  key = 'ERR key is empty or too long',
  argument = 'ERR invalid argument',
  integer = 'ERR value is not an integer or out of range',
  wrongtype = 'WRONGTYPE key holds a state of another algorithm or size that this limit ' ..
              'cannot carry over (SL.RESET the key to start it again)',
  foreign = 'WRONGTYPE Operation against a key holding the wrong kind of value',
}

-- Errors travel as a table {err = text} up to the dispatcher, which returns
-- them: a Lua error() would add the script's name and line to the text.
local function fail(what) return {err = ERRORS[what] or what} end

-- backend.h's SL_CHARGE_LOG_ERR: the module's words for a charge of a log
local CHARGE_LOG_ERR = 'ERR CHARGE: a sliding_log cannot owe (it holds at most limit timestamps)'

local t = redis.call('TIME')
local NOW = tonumber(t[1]) * 1000000 + tonumber(t[2]) -- Unix microseconds

-- ---- integers ----

-- floor(a / b) for b > 0, corrected where the double quotient rounded
-- across an integer; exact while a and the product stay below 2^53.
local function div_floor(a, b)
  local q = math.floor(a / b)
  if q * b > a then q = q - 1 elseif (q + 1) * b <= a then q = q + 1 end
  return q
end

local function div_ceil(a, b)
  local q = div_floor(a, b)
  if q * b < a then q = q + 1 end
  return q
end

local function mod_floor(a, b) return a - div_floor(a, b) * b end

local function gcd(a, b)
  while b > 0 do a, b = b, math.fmod(a, b) end
  return a
end

-- (a * 1000) mod p for 0 <= a < p, without forming the product when it would
-- pass 2^53: by doubling, every step below 2p (exact for p below 2^52).
local function times1000_mod(a, p)
  if p < 9e12 then return math.fmod(a * 1000, p) end
  local r = 0
  for _, bit in ipairs({1, 1, 1, 1, 1, 0, 1, 0, 0, 0}) do -- 1000 in binary
    r = r * 2
    if r >= p then r = r - p end
    if bit == 1 then
      r = r + a
      if r >= p then r = r - p end
    end
  end
  return r
end

-- ---- times: {whole Unix microseconds, nanoseconds beyond} ----

local function pair_add(us, r, ns)
  local x = r + ns
  local q = div_floor(x, 1000)
  return us + q, x - q * 1000
end

-- Nanoseconds from pair b to pair a.
local function pair_diff(au, ar, bu, br) return (au - bu) * 1000 + (ar - br) end

local function pair_before(au, ar, bu, br) return au < bu or (au == bu and ar < br) end

-- Nanoseconds from the pair to now (negative for a time still to come).
local function ago(us, r) return pair_diff(NOW, 0, us, r) end

-- The PXAT of a state "never seen" again ns nanoseconds from now: Unix
-- milliseconds rounded up, so that Redis never drops a key that still limits.
local function pxat(ns)
  local us, r = pair_add(NOW, 0, ns)
  local ms = div_floor(us, 1000)
  if us - ms * 1000 > 0 or r > 0 then ms = ms + 1 end
  return string.format('%.0f', ms)
end

-- ---- calendar (src/algo/calendar.c) ----

local function days_from_civil(y, m, d)
  if m <= 2 then y = y - 1 end
  local era = math.floor(y / 400)
  local yoe = y - era * 400
  local mp = m > 2 and m - 3 or m + 9
  local doy = math.floor((153 * mp + 2) / 5) + d - 1
  local doe = yoe * 365 + math.floor(yoe / 4) - math.floor(yoe / 100) + doy
  return era * 146097 + doe - 719468
end

local function civil_from_days(days)
  local z = days + 719468
  local era = math.floor(z / 146097)
  local doe = z - era * 146097
  local yoe = math.floor((doe - math.floor(doe / 1460) + math.floor(doe / 36524) -
                          math.floor(doe / 146096)) / 365)
  local doy = doe - (365 * yoe + math.floor(yoe / 4) - math.floor(yoe / 100))
  local mp = math.floor((5 * doy + 2) / 153)
  local d = doy - math.floor((153 * mp + 2) / 5) + 1
  local m = mp < 10 and mp + 3 or mp - 9
  local y = yoe + era * 400
  if m <= 2 then y = y + 1 end
  return y, m, d
end

local function month_first_day(mi)
  local years = math.floor(mi / 12)
  return days_from_civil(1970 + years, mi - years * 12 + 1, 1)
end

-- The day a window of month index mi begins on: the reset day of that month
-- (0 or 1: the first), or its last day when it has fewer (calendar.c's
-- sl_month_reset_day).
local function month_reset_day(mi, day)
  local first = month_first_day(mi)
  if day <= 1 then return first end
  local last = month_first_day(mi + 1) - 1
  return math.min(first + day - 1, last)
end

-- The calendar-month window of l that holds the time (us, r): start, end.
local function month_window_at(l, us, r)
  local days = div_floor(us, US_PER_DAY)
  local rem = us - days * US_PER_DAY
  local off_days = div_floor(l.off, NS_PER_DAY)
  local tod = rem * 1000 + r + (l.off - off_days * NS_PER_DAY)
  days = days + off_days
  if tod >= NS_PER_DAY then
    tod = tod - NS_PER_DAY
    days = days + 1
  end
  local y, m = civil_from_days(days)
  local mi = (y - 1970) * 12 + (m - 1)
  -- before this month's reset day, the cycle began in the month before
  if l.day > 1 and days < month_reset_day(mi, l.day) then mi = mi - 1 end
  local first = math.floor(mi / l.months) * l.months
  local ds, de = month_reset_day(first, l.day), month_reset_day(first + l.months, l.day)
  local su, sr = pair_add(us - (days - ds) * US_PER_DAY, r, -tod)
  return su, sr, su + (de - ds) * US_PER_DAY, sr
end

-- The window of l that holds now: start and end pairs (calendar.h's
-- sl_window_at; now is Unix time, so the clock offset is 0).
local function window_at(l)
  if l.months > 0 then return month_window_at(l, NOW, 0) end
  local p = l.period
  local m = times1000_mod(math.fmod(NOW, p), p) - l.phase -- (now - phase) mod p
  if m < 0 then m = m + p end
  local su, sr = pair_add(NOW, 0, -m)
  local eu, er = pair_add(su, sr, p)
  return su, sr, eu, er
end

-- The end of the window that begins at (us, r).
local function window_end(l, us, r)
  if l.months > 0 then
    local _, _, eu, er = month_window_at(l, us, r)
    return eu, er
  end
  return pair_add(us, r, l.period)
end

-- ---- the algorithms ----
--
-- Each has: fresh() a "never seen" state; decode(fields) and encode(s);
-- take(l, s, cost, commit) the decision {allowed, limit, remaining, retry,
-- reset, delay} (durations in ns from now, retry NEVER when no wait will do),
-- writing s only when commit and admitted; expires(l, s) the ns from now until
-- s is "never seen" (<= 0: already); used(l, s) the units s has used now under
-- l (carry.c's "used"), and wait(l, s, u) the ns until it has used at most u;
-- refund(l, s, cost) gives a take of cost back (sl_refund), writing s, and
-- answers the units given back; charge(l, s, cost) takes cost whatever s
-- holds (sl_charge), writing s, and may leave it in debt (none for the log
-- and the concurrency limit, which cannot owe).

local A = {}

local function decision(l)
  return {allowed = false, limit = l.burst, remaining = 0, retry = 0, reset = 0, delay = 0}
end

-- The first n fields as integers, or nil when one is not a decimal integer
-- (tonumber alone would take "nan", "inf" or "0x10").
local function numbers(fields, n)
  local out = {}
  for i = 1, n do
    if not string.match(fields[i] or '', '^%-?%d+$') then return nil end
    out[i] = tonumber(fields[i])
  end
  return out
end

local function fmt(...)
  local out = {}
  for i, v in ipairs({...}) do out[i] = string.format('%.0f', v) end
  return table.concat(out, ' ')
end

-- Generic used and wait through a take of the algorithm itself, for the
-- algorithms whose numbers stay as small as their limit (windows, the log).
local function used_by_take(alg)
  return function(l, s)
    local d = alg.take(l, s, 0, false)
    return d.limit - d.remaining
  end
end

local function wait_by_take(alg)
  return function(l, s, u)
    local d = alg.take(l, s, math.max(l.limit - u, 0), false)
    return d.allowed and 0 or d.retry
  end
end

-- GCRA (gcra.c). State: the TAT as whole microseconds `tat` plus `n` units
-- of 1/D ns (D = the rate's denominator, kept with it), so that the debt
-- TAT - now is an exact integer count of those units. With P the emission
-- interval in such units (T = P/D ns) and tau = burst * P:
--   admit when debt + cost * P <= tau, then TAT = now + debt + cost * P.
local gcra = {}
A.gcra = gcra

function gcra.fresh() return {} end
function gcra.decode(f)
  local v = numbers(f, 3)
  if not v or v[3] < 1 then return {} end
  return {tat = v[1], n = v[2], D = v[3]}
end
function gcra.encode(s) return fmt(s.tat, s.n, s.D) end

-- The debt of s in units of 1/l.D ns, not capped (0 for a past TAT).
local function gcra_debt(l, s)
  if not s.tat then return 0 end
  local n = s.n
  if s.D ~= l.D then n = math.floor(n / s.D) * l.D end -- written under another rate
  local debt = (s.tat - NOW) * 1000 * l.D + n
  return debt > 0 and debt or 0
end

local function gcra_decide(l, s, cost, commit, queue)
  -- More debt than tau is a debt (sl_charge, or a change of limit): refused
  -- until time has paid it back, never capped.
  local debt = gcra_debt(l, s)
  local d = decision(l)
  if cost > l.burst then
    d.retry = NEVER
  else
    local new = debt + cost * l.P
    if new <= l.tau then
      d.allowed = true
      if queue then d.delay = div_ceil(debt, l.D) end
      if commit then
        local unit = 1000 * l.D
        local q = div_floor(new, unit)
        s.tat, s.n, s.D = NOW + q, new - q * unit, l.D
      end
      debt = new
    else
      d.retry = div_ceil(new - l.tau, l.D)
    end
  end
  d.reset = div_ceil(debt, l.D)
  if debt > l.tau then -- in debt: refused, nothing remains
    d.remaining = 0
  elseif l.cell then -- redis-cell's: (tau - debt) and T truncated to microseconds
    d.remaining = math.floor(math.floor((l.tau - debt) / 1000) / l.cell_us)
  else
    d.remaining = l.burst - div_ceil(debt, l.P)
  end
  return d
end

function gcra.take(l, s, cost, commit) return gcra_decide(l, s, cost, commit, false) end
function gcra.expires(l, s)
  if not s.tat then return 0 end
  return (s.tat - NOW) * 1000 + div_ceil(s.n, s.D)
end
function gcra.used(l, s) return div_ceil(gcra_debt(l, s), l.P) end
-- The TAT goes back by cost * T, never before now; the units given back are
-- the whole intervals the debt shrank by (a debt beyond tau too).
function gcra.refund(l, s, cost)
  local debt = gcra_debt(l, s)
  if debt <= 0 then return 0 end
  local left = math.max(debt - cost * l.P, 0)
  local given = div_ceil(debt, l.P) - div_ceil(left, l.P)
  local unit = 1000 * l.D
  local q = div_floor(left, unit)
  s.tat, s.n, s.D = NOW + q, left - q * unit, l.D
  return given
end
-- The TAT moves to max(TAT, now) + cost * T, at most SL_TIME_MAX (gcra.c's
-- sl_gcra_charge saturates there).
function gcra.charge(l, s, cost)
  local unit = 1000 * l.D
  local most = (TIME_MAX_US - NOW) * unit + TIME_MAX_NS * l.D -- SL_TIME_MAX - now, in 1/D ns
  local new = gcra_debt(l, s) + cost * l.P
  if new >= most then
    s.tat, s.n, s.D = TIME_MAX_US, TIME_MAX_NS * l.D, l.D
    return
  end
  local q = div_floor(new, unit)
  s.tat, s.n, s.D = NOW + q, new - q * unit, l.D
end
function gcra.wait(l, s, u)
  local over = gcra_debt(l, s) - u * l.P
  return over > 0 and div_ceil(over, l.D) or 0
end

-- The leaky bucket as a queue: GCRA's state and decision, and the wait.
local leaky = {}
A.leaky_bucket = leaky
for k, v in pairs(gcra) do leaky[k] = v end
function leaky.take(l, s, cost, commit) return gcra_decide(l, s, cost, commit, true) end

-- The token bucket (token_bucket.c). State: the anchor pair (au, ar) and the
-- debt, the tokens missing there; tokens accrue D every P ns, and the anchor
-- moves by whole P (or to now when the bucket is full), so nothing rounds.
local tb = {}
A.token_bucket = tb

function tb.fresh() return {debt = 0} end
function tb.decode(f)
  local v = numbers(f, 3)
  if not v then return tb.fresh() end
  return {au = v[1], ar = v[2], debt = v[3]}
end
function tb.encode(s) return fmt(s.au, s.ar, s.debt) end

local function tb_time_for(l, tokens) return div_ceil(tokens * l.P, l.D) end

-- token_bucket.c's sl_tb_debt_max: the most tokens a charge leaves missing,
-- those that accrue in SL_SPAN_MAX ns (at most SL_SPAN_MAX), and never less
-- than a take leaves.
local function tb_debt_max(l)
  return math.max(math.min(div_floor(SPAN_MAX * l.D, l.P), SPAN_MAX), l.burst + l.D)
end

-- The refill at now: anchor, debt and the tokens accrued since the anchor.
-- `capped`: a debt no take or charge under l can leave (bytes of another
-- limit) is a full bucket.
local function tb_refill(l, s, capped)
  local au, ar, debt = s.au, s.ar, s.debt or 0
  if debt < 0 or (capped and debt > l.burst + l.D and debt > tb_debt_max(l)) or not au then
    return NOW, 0, 0, 0
  end
  local elapsed = math.max(ago(au, ar), 0)
  if debt == 0 or elapsed >= tb_time_for(l, debt) then return NOW, 0, 0, 0 end
  local accrued = div_floor(elapsed * l.D, l.P)
  if elapsed >= l.P then
    local periods = div_floor(elapsed, l.P)
    au, ar = pair_add(au, ar, periods * l.P)
    debt = debt - periods * l.D
    accrued = accrued - periods * l.D
  end
  return au, ar, debt, accrued
end

function tb.take(l, s, cost, commit)
  local au, ar, debt, accrued = tb_refill(l, s, true)
  local cap = l.burst
  local tokens = math.max(cap - debt + accrued, 0)
  local d = decision(l)
  if cost > cap then
    d.retry = NEVER
  elseif tokens >= cost then
    d.allowed = true
    debt = debt + cost
    tokens = tokens - cost
    if commit then s.au, s.ar, s.debt = au, ar, debt end
  else
    d.retry = tb_time_for(l, debt + cost - cap) - ago(au, ar)
  end
  d.remaining = tokens
  d.reset = debt == 0 and 0 or tb_time_for(l, debt) - ago(au, ar)
  return d
end
function tb.expires(l, s)
  -- a debt no take under l leaves is a full bucket to l, as in take
  if (s.debt or 0) <= 0 or (s.debt > l.burst + l.D and s.debt > tb_debt_max(l)) or
     not s.au then
    return 0
  end
  return tb_time_for(l, s.debt) - ago(s.au, s.ar)
end
function tb.used(l, s)
  local _, _, debt, accrued = tb_refill(l, s, false)
  return math.max(debt - accrued, 0)
end
-- Tokens go back into the bucket, up to its brim (a full bucket is anchored
-- at now, as a take leaves it).
function tb.refund(l, s, cost)
  local au, ar, debt, accrued = tb_refill(l, s, true)
  local missing = debt - accrued
  if missing <= 0 then return 0 end
  local given = math.min(cost, missing)
  if given == missing then
    au, ar, debt = NOW, 0, 0
  else
    debt = debt - given
  end
  s.au, s.ar, s.debt = au, ar, debt
  return given
end
-- Tokens leave whatever the bucket holds, down to the floor of tb_debt_max.
function tb.charge(l, s, cost)
  local au, ar, debt = tb_refill(l, s, true)
  s.au, s.ar, s.debt = au, ar, math.min(debt + cost, math.max(tb_debt_max(l), debt))
end
function tb.wait(l, s, u)
  local au, ar, debt, accrued = tb_refill(l, s, false)
  if debt - accrued <= u then return 0 end
  return tb_time_for(l, debt - u) - ago(au, ar)
end

-- The fixed window (fixed_window.c). State: the window's start pair and the
-- units admitted in it.
local fw = {}
A.fixed_window = fw

function fw.fresh() return {count = 0} end
function fw.decode(f)
  local v = numbers(f, 3)
  if not v then return fw.fresh() end
  return {su = v[1], sr = v[2], count = v[3]}
end
function fw.encode(s) return fmt(s.su, s.sr, s.count) end

function fw.take(l, s, cost, commit)
  local lim, su, sr, count = l.limit, s.su, s.sr, s.count or 0
  local eu, er
  -- a charge may count past the limit, up to SL_SPAN_MAX
  if count > 0 and count <= SPAN_MAX and su and not pair_before(NOW, 0, su, sr) then
    eu, er = window_end(l, su, sr)
  end
  if not eu or not pair_before(NOW, 0, eu, er) then
    su, sr, eu, er = window_at(l)
    count = 0
  end
  local d = decision(l)
  if cost > lim then
    d.retry = NEVER
  elseif count + cost <= lim then
    d.allowed = true
    count = count + cost
    if commit then s.su, s.sr, s.count = su, sr, count end
  else
    d.retry = pair_diff(eu, er, NOW, 0)
  end
  d.remaining = math.max(lim - count, 0)
  d.reset = count == 0 and 0 or pair_diff(eu, er, NOW, 0)
  return d
end
function fw.expires(l, s)
  if (s.count or 0) <= 0 or not s.su then return 0 end
  local eu, er = window_end(l, s.su, s.sr)
  return pair_diff(eu, er, NOW, 0)
end
fw.used = used_by_take(fw)
fw.wait = wait_by_take(fw)
-- The count goes back while now is in the window that counted it.
function fw.refund(l, s, cost)
  local count = s.count or 0
  if count <= 0 or count > SPAN_MAX or not s.su or pair_before(NOW, 0, s.su, s.sr) then
    return 0
  end
  local eu, er = window_end(l, s.su, s.sr)
  if not pair_before(NOW, 0, eu, er) then return 0 end
  local given = math.min(cost, count)
  s.count = count - given
  return given
end
-- The count of now's window grows whatever it holds, up to SL_SPAN_MAX; a
-- new window starts at 0 as a take starts it.
function fw.charge(l, s, cost)
  local su, sr, count = s.su, s.sr, s.count or 0
  local eu, er
  if count > 0 and count <= SPAN_MAX and su and not pair_before(NOW, 0, su, sr) then
    eu, er = window_end(l, su, sr)
  end
  if not eu or not pair_before(NOW, 0, eu, er) then
    su, sr = window_at(l)
    count = 0
  end
  s.su, s.sr, s.count = su, sr, math.min(count + cost, SPAN_MAX)
end

-- The sliding window counter (sliding_window.c). State: the current window's
-- start pair, its units and the previous window's; the previous counts by
-- the share of it the sliding window still covers, (p - 1 - elapsed) / p.
-- The products below are exact while they stay below 2^53 (over a day, a
-- previous window of at most 104 units); beyond, a product rounds, which
-- changes an answer only at a tie to one part in 2^53. A take with prev = 0
-- is always compared exactly.
local sw = {}
A.sliding_window = sw

function sw.fresh() return {cur = 0, prev = 0} end
function sw.decode(f)
  local v = numbers(f, 4)
  if not v then return sw.fresh() end
  return {su = v[1], sr = v[2], cur = v[3], prev = v[4]}
end
function sw.encode(s) return fmt(s.su, s.sr, s.cur, s.prev) end

function sw.take(l, s, cost, commit)
  local lim, su, sr, cur, prev = l.limit, s.su, s.sr, s.cur or 0, s.prev or 0
  local eu, er
  if cur < 0 or cur > SPAN_MAX or prev < 0 or prev > SPAN_MAX or not su or
     pair_before(NOW, 0, su, sr) then
    cur, prev = 0, 0
  else
    eu, er = window_end(l, su, sr)
    if not pair_before(NOW, 0, eu, er) then
      local e2u, e2r = window_end(l, eu, er)
      if pair_before(NOW, 0, e2u, e2r) then -- the next window: cur becomes prev
        su, sr, prev = eu, er, cur
      else
        prev = 0
      end
      cur = 0
    end
  end
  if cur == 0 and prev == 0 then
    su, sr, eu, er = window_at(l)
  else
    eu, er = window_end(l, su, sr)
  end
  local p = pair_diff(eu, er, su, sr)
  local overlap = p - 1 - pair_diff(NOW, 0, su, sr)
  local d = decision(l)
  if cost > lim then
    d.retry = NEVER
  elseif cur + cost <= lim and prev * overlap <= (lim - cur - cost) * p then
    d.allowed = true
    cur = cur + cost
    if commit then s.su, s.sr, s.cur, s.prev = su, sr, cur, prev end
  elseif cur + cost <= lim then
    -- later in this window prev's share shrinks enough (prev > 0 here)
    local room = div_floor((lim - cur - cost) * p, prev)
    d.retry = pair_diff(su, sr, NOW, 0) + (p - 1 - math.min(room, p - 1))
  else
    -- not before the next window, where cur becomes prev (cur > 0)
    local nu, nr = window_end(l, eu, er)
    local pn = pair_diff(nu, nr, eu, er)
    local room = div_floor((lim - cost) * pn, cur)
    d.retry = pair_diff(eu, er, NOW, 0) + (pn - 1 - math.min(room, pn - 1))
  end
  d.remaining = math.max(lim - cur - div_ceil(prev * overlap, p), 0)
  if cur > 0 then
    local nu, nr = window_end(l, eu, er)
    d.reset = pair_diff(nu, nr, NOW, 0)
  elseif prev > 0 then
    d.reset = pair_diff(eu, er, NOW, 0)
  end
  return d
end
function sw.expires(l, s)
  if not s.su or ((s.cur or 0) <= 0 and (s.prev or 0) <= 0) then return 0 end
  local eu, er = window_end(l, s.su, s.sr)
  if s.cur > 0 then eu, er = window_end(l, eu, er) end
  return pair_diff(eu, er, NOW, 0)
end
sw.used = used_by_take(sw)
sw.wait = wait_by_take(sw)
-- The state's window's count goes back while it still weighs: in its window,
-- and in the next as the previous window's.
function sw.refund(l, s, cost)
  local cur, prev = s.cur or 0, s.prev or 0
  if cur <= 0 or cur > SPAN_MAX or prev < 0 or prev > SPAN_MAX or not s.su or
     pair_before(NOW, 0, s.su, s.sr) then
    return 0
  end
  local eu, er = window_end(l, s.su, s.sr)
  local nu, nr = window_end(l, eu, er)
  if not pair_before(NOW, 0, nu, nr) then return 0 end
  local given = math.min(cost, cur)
  s.cur = cur - given
  return given
end
-- The count of now's window grows whatever the counts hold, up to
-- SL_SPAN_MAX, the state moved to now's window first as a take moves it.
function sw.charge(l, s, cost)
  local su, sr, cur, prev = s.su, s.sr, s.cur or 0, s.prev or 0
  if cur < 0 or cur > SPAN_MAX or prev < 0 or prev > SPAN_MAX or not su or
     pair_before(NOW, 0, su, sr) then
    cur, prev = 0, 0
  else
    local eu, er = window_end(l, su, sr)
    if not pair_before(NOW, 0, eu, er) then
      local e2u, e2r = window_end(l, eu, er)
      if pair_before(NOW, 0, e2u, e2r) then
        su, sr, prev = eu, er, cur
      else
        prev = 0
      end
      cur = 0
    end
  end
  if cur == 0 and prev == 0 then su, sr = window_at(l) end
  s.su, s.sr, s.cur, s.prev = su, sr, math.min(cur + cost, SPAN_MAX), prev
end

-- The sliding log (sliding_log.c), exact. State: the limit it was written
-- under, then the admitted units as runs {t, n}: n units admitted at Unix
-- microsecond t (a take of cost c admits c units at one instant), oldest
-- first. A unit counts while now < t + period.
local log = {}
A.sliding_log = log

function log.fresh() return {runs = {}} end
function log.decode(f)
  local cap = numbers(f, 1)
  local s = {cap = cap and cap[1], runs = {}}
  for i = 2, #f do
    local tt, n = string.match(f[i], '^(%d+),(%d+)$')
    if not tt then return log.fresh() end
    s.runs[#s.runs + 1] = {tonumber(tt), tonumber(n)}
  end
  return s
end
function log.encode(s)
  local out = {string.format('%.0f', s.cap)}
  for i, run in ipairs(s.runs) do out[i + 1] = string.format('%.0f,%.0f', run[1], run[2]) end
  return table.concat(out, ' ')
end

-- The runs still counted now under l, at most l.limit units of the newest
-- (a log of a larger limit keeps what this one holds), and their total.
local function log_live(l, s)
  local live, count = {}, 0
  for _, run in ipairs(s.runs) do
    if ago(run[1], 0) < l.period then
      live[#live + 1] = {run[1], run[2]}
      count = count + run[2]
    end
  end
  local i = 1
  while count > l.limit do
    local drop = math.min(live[i][2], count - l.limit)
    live[i][2] = live[i][2] - drop
    count = count - drop
    if live[i][2] == 0 then i = i + 1 end
  end
  if i > 1 then
    local kept = {}
    for j = i, #live do kept[#kept + 1] = live[j] end
    live = kept
  end
  return live, count
end

function log.take(l, s, cost, commit)
  local cap, p = l.limit, l.period
  local live, count = log_live(l, s)
  local newest = count > 0 and live[#live][1] or nil
  local stamp = newest and math.max(NOW, newest) or NOW -- never older than the newest
  local d = decision(l)
  if cost > cap then
    d.retry = NEVER
  elseif count + cost <= cap then
    d.allowed = true
    if cost > 0 then
      if newest == stamp then
        live[#live][2] = live[#live][2] + cost
      else
        live[#live + 1] = {stamp, cost}
      end
      newest = stamp
      count = count + cost
    end
  else
    -- the (count + cost - cap)-th oldest unit must leave first
    local k, i = count + cost - cap, 1
    while k > live[i][2] do
      k = k - live[i][2]
      i = i + 1
    end
    d.retry = math.max(p - ago(live[i][1], 0), 0)
  end
  if commit then s.runs, s.cap = live, cap end
  d.remaining = cap - count
  d.reset = count == 0 and 0 or math.max(p - ago(newest, 0), 0)
  return d
end
-- sliding_log.c's resize: another limit's log as this one's, its newest
-- stamps, as many as this limit holds (a take drops those its period has
-- left behind).
function log.resize(l, s)
  local runs, count = {}, 0
  for i = #s.runs, 1, -1 do
    if count >= l.limit then break end
    local n = math.min(s.runs[i][2], l.limit - count)
    table.insert(runs, 1, {s.runs[i][1], n})
    count = count + n
  end
  return {cap = l.limit, runs = runs}
end
function log.expires(l, s)
  local last = s.runs[#s.runs]
  return last and l.period - ago(last[1], 0) or 0
end
log.used = used_by_take(log)
log.wait = wait_by_take(log)
-- The newest units still in the log go.
function log.refund(l, s, cost)
  local live, count = log_live(l, s)
  local given = math.min(cost, count)
  local k = given
  while k > 0 do
    local last = live[#live]
    local drop = math.min(last[2], k)
    last[2], k = last[2] - drop, k - drop
    if last[2] == 0 then live[#live] = nil end
  end
  s.runs, s.cap = live, l.limit
  return given
end

-- The concurrency limit (concurrency.c). State: the limit it was written
-- under, then its leases {id, expiry, weight}, oldest expiry first; an
-- expiry is rounded up to a whole microsecond, which changes no comparison
-- with a now that is one, nor any duration rounded up to milliseconds.
local conc = {}
A.concurrency = conc

function conc.fresh() return {leases = {}} end
function conc.decode(f)
  local cap = numbers(f, 1)
  local s = {cap = cap and cap[1], leases = {}}
  for i = 2, #f do
    local id, e, w = string.match(f[i], '^(%x+),(%d+),(%d+)$')
    if not id then return conc.fresh() end
    s.leases[#s.leases + 1] = {id, tonumber(e), tonumber(w)}
  end
  return s
end
function conc.encode(s)
  local out = {string.format('%.0f', s.cap)}
  for i, ls in ipairs(s.leases) do out[i + 1] = string.format('%s,%.0f,%.0f', ls[1], ls[2], ls[3]) end
  return table.concat(out, ' ')
end

-- The leases still held now, and the units they hold.
local function conc_live(s)
  local live, in_flight = {}, 0
  for _, ls in ipairs(s.leases) do
    if ls[2] > NOW then
      live[#live + 1] = ls
      in_flight = in_flight + ls[3]
    end
  end
  return live, in_flight
end

-- An acquire of weight `cost` with lease id `id` (lowercase hex).
function conc.acquire(l, s, cost, id, commit)
  local cap = l.limit
  local live, in_flight = conc_live(s)
  local last = #live > 0 and live[#live][2] or 0
  local d = decision(l)
  if cost > cap then
    d.retry = NEVER
  elseif in_flight + cost <= cap then
    d.allowed = true
    if cost > 0 then
      last = math.max(NOW + div_ceil(l.period, 1000), last) -- keeps the order if TIME steps back
      live[#live + 1] = {id, last, cost}
      in_flight = in_flight + cost
    end
  else
    -- wait for the oldest leases to expire until cost fits
    local need, i = in_flight + cost - cap, 0
    while i < #live and need > 0 do
      i = i + 1
      need = need - live[i][3]
    end
    d.retry = i > 0 and (live[i][2] - NOW) * 1000 or l.period
  end
  if commit then s.leases, s.cap = live, cap end
  d.remaining = cap - in_flight
  d.reset = #live == 0 and 0 or (last - NOW) * 1000
  return d
end
function conc.release(s, id)
  local live = conc_live(s)
  for i, ls in ipairs(live) do
    if ls[1] == id then
      table.remove(live, i)
      s.leases = live
      return 1
    end
  end
  s.leases = live
  return 0
end
function conc.held(s, id)
  for _, ls in ipairs(conc_live(s)) do
    if ls[1] == id then return true end
  end
  return false
end
-- concurrency.c's resize: the live leases, under this limit (enter() has
-- checked that they fit).
function conc.resize(l, s)
  return {cap = l.limit, leases = (conc_live(s))}
end
function conc.expires(l, s)
  local last = s.leases[#s.leases]
  return last and (last[2] - NOW) * 1000 or 0
end

-- ---- limits ----

-- A decimal argument as Redis reads one (an optional '-', at most 19 digits,
-- within int64): its number, or nil.
local function int_arg(s)
  local neg, digits = string.match(s, '^(%-?)(%d+)$')
  if not digits or #digits > 19 then return nil end
  if #digits == 19 and digits > (neg == '-' and '9223372036854775808' or '9223372036854775807') then
    return nil
  end
  return tonumber(s)
end

-- Is the decimal argument s (value v) above the bound (text, default
-- SL_SPAN_MAX)? Near 2^61 a double cannot tell neighbours apart, the text can.
local function above_span(s, v, bound)
  bound = bound or SPAN_MAX_TEXT
  local b = tonumber(bound)
  if v ~= b then return v > b end
  local digits = string.gsub(s, '^0+', '')
  return #digits > #bound or (#digits == #bound and digits > bound)
end

-- A positive decimal without its leading zeros, as a carried state names
-- its limit.
local function canonical(text) return (string.gsub(text, '^0+', '')) end

-- sl_limit_init: a limit of `algo` with limit, period (ns) and burst (0 = the
-- limit), given as texts and numbers. Returns the limit, or an error key.
local function new_limit(algo, ls, lim, ps, period, bs, burst)
  if lim <= 0 or above_span(ls, lim) then return nil, 'limit' end
  if period <= 0 or above_span(ps, period) then return nil, 'period' end
  if burst < 0 or above_span(bs, burst) then return nil, 'burst' end
  if burst == 0 then burst = lim end
  local g = gcd(period, lim)
  local P, D = period / g, lim / g
  if math.floor(burst * P / D) > SPAN_MAX then return nil, 'overflow' end
  if (algo == 'sliding_log' or algo == 'concurrency') and lim > BIG_MAX then
    return nil, 'limit'
  end
  if algo == 'fixed_window' or algo == 'sliding_window' or algo == 'sliding_log' or
     algo == 'concurrency' then
    burst = lim
  end
  return {algo = algo, limit = lim, period = period, burst = burst, P = P, D = D,
          tau = burst * P, months = 0, day = 0, off = 0, phase = 0,
          tag = {canonical(ls), canonical(ps)}} -- the texts: exact beyond 2^53 too
end

-- sl_limit_init_cell: CL.THROTTLE's max_burst count period_seconds.
local function new_cell(mbs, max_burst, count_s, count, period_s)
  if max_burst < 0 or above_span(mbs, max_burst, '2305843009213693950') then return nil, 'burst' end
  if count <= 0 or above_span(count_s, count) then return nil, 'limit' end
  local period = period_s * 1000000000
  if period_s <= 0 or period > SPAN_MAX then return nil, 'period' end
  local l, e = new_limit('gcra', count_s, count, string.format('%.0f', period), period, '1', 1)
  if not l then return nil, e end
  local T = math.floor(period / count) -- redis-cell's T: through a double, truncated
  if T < 1000 then return nil, 'rate' end
  local burst = max_burst + 1
  if T * burst > SPAN_MAX then return nil, 'overflow' end
  l.cell, l.burst, l.P, l.D, l.tau, l.cell_us = true, burst, T, 1, T * burst, math.floor(T / 1000)
  return l
end

-- The limit a state is read under to carry it over (carry.c's
-- sl_carry_limit): its algorithm, limit and period, windows unaligned.
-- used() and wait() read a state without the burst; expires() reads it.
local function carry_limit(algo, ls, lim, ps, period)
  local l = new_limit(algo, ls, lim, ps, period, '0', 0)
  -- the largest burst the rate allows (the windows keep theirs: the limit),
  -- so that no debt the state holds reads as another limit's bytes
  if l and (algo == 'gcra' or algo == 'leaky_bucket' or algo == 'token_bucket') then
    local most = math.floor(SPAN_MAX * l.D / l.P)
    if most > lim then l.burst, l.tau = most, most * l.P end
  end
  return l
end

local function tag_limit(algo, tag)
  local lim, period = tonumber(tag[1]), tonumber(tag[2])
  if not lim or not period then return nil end
  return carry_limit(algo, tag[1], lim, tag[2], period)
end

local ALGORITHMS = {cell = true, gcra = true, token_bucket = true, leaky_bucket = true,
                    fixed_window = true, sliding_log = true, sliding_window = true,
                    concurrency = true}

-- One group of 8 arguments from ARGV[at]: the limit (with .cost), or an
-- error, checked in the order SL.DECIDE checks them.
local function parse_group(at)
  local v = {}
  for i = 1, 7 do
    v[i] = int_arg(ARGV[at + i])
    if not v[i] then return nil, 'integer' end
  end
  local name = string.lower(ARGV[at])
  if not ALGORITHMS[name] then
    return nil, "ERR unknown algorithm '" .. string.sub(ARGV[at], 1, 32) .. "'"
  end
  local cell = name == 'cell'
  if v[4] < 0 then return nil, 'cost' end
  -- flags: bit 0 carried, bits 8 to 12 the reset day (SL_DECIDE_FLAGS)
  local carry = v[7] % 256
  local day = (v[7] - carry) / 256
  if v[7] < 0 or carry > 1 or day > 31 or (cell and (v[5] ~= 0 or v[6] ~= 0 or day ~= 0)) then
    return nil, "ERR syntax error: a group's months, offset and flags are out of range"
  end
  local l, e
  if cell then
    l, e = new_cell(ARGV[at + 1], v[1], ARGV[at + 2], v[2], v[3])
  else
    l, e = new_limit(name, ARGV[at + 1], v[1], ARGV[at + 2], v[2], ARGV[at + 3], v[3])
    if l then -- sl_limit_align_day
      if v[5] < 0 or v[5] > MONTHS_MAX then return nil, 'period' end
      if v[6] < -UTC_OFFSET_MAX or v[6] > UTC_OFFSET_MAX then return nil, 'argument' end
      if day > 1 and v[5] == 0 then return nil, 'period' end
      if v[5] > 0 and name == 'sliding_log' then return nil, 'period' end
      l.months, l.off, l.day = v[5], v[6], day
      l.phase = mod_floor(4 * NS_PER_DAY - v[6], l.period)
    end
  end
  if not l then return nil, e end
  if carry == 1 then
    if cell or name == 'concurrency' then return nil, 'algorithm' end
    l.carried = true
  end
  l.cost = v[4]
  return l
end

-- ---- keys ----

-- sl_quota_central's int64 fields: seen first remaining anchor frac, then
-- synced_at demand hold rate carry for each of the 16 nodes' slots.
local SYNC_FIELDS = 85

-- The fields of a sync record, "sync" and the 85 fields as decimal integers
-- (v is the value after the prefix): their texts and their numbers, or nil
-- when v is no such record. Made of digits, '-' and spaces, a word is a
-- decimal integer exactly when tonumber reads it ("5-3" and "-" it does not).
local function sync_record(v)
  if not string.find(v, '^sync [%d%- ]*$') then return nil end
  local f, n = {}, {}
  for w in string.gmatch(string.sub(v, 6), '%S+') do
    local x = tonumber(w)
    if not x then return nil end
    f[#f + 1], n[#n + 1] = w, x + 0 -- + 0: "-0" is 0, as the C's int64 holds it
  end
  if #f ~= SYNC_FIELDS then return nil end
  return f, n
end

-- The key's value: {exists, st = {algo, tag, s}}, or an error.
local function load(key)
  if key == '' then return nil, 'key' end
  local v = redis.pcall('GET', key)
  if type(v) == 'table' then return nil, 'foreign' end -- a hash, a list...
  if not v then return {exists = false} end
  if string.sub(v, 1, #PREFIX) ~= PREFIX then return nil, 'foreign' end
  local f = {}
  for w in string.gmatch(string.sub(v, #PREFIX + 1), '%S+') do f[#f + 1] = w end
  -- the sync strategy's record (op SYNC): a state no decision can read, which
  -- RESET deletes as any other of the script's
  if f[1] == 'sync' and sync_record(string.sub(v, #PREFIX + 1)) then return nil, 'wrongtype' end
  local alg = A[f[1] or '']
  if not alg or not f[3] then return nil, 'foreign' end
  local tag = f[2] ~= '-' and {f[2], f[3]} or nil
  local fields = {}
  for i = 4, #f do fields[#fields + 1] = f[i] end
  return {exists = true, st = {algo = f[1], tag = tag, s = alg.decode(fields)}}
end

-- Writes the entry's state as its key's value, expiring when it is "never
-- seen" again, or deletes the key when it already is.
local function store(key, e)
  local st = e.st
  local l = st.limit
  local exp = A[st.algo].expires(l, st.s)
  if exp <= 0 then
    -- Only a key of this shape goes; another's state stays until a take that
    -- changes something replaces it (as the module keeps it).
    if e.exists and e.own then redis.call('DEL', key) end
    return
  end
  local tag = st.tag and (st.tag[1] .. ' ' .. st.tag[2]) or '- -'
  redis.call('SET', key, PREFIX .. st.algo .. ' ' .. tag .. ' ' .. A[st.algo].encode(st.s),
             'PXAT', pxat(exp))
end

local function same_tag(a, b) return a and b and a[1] == b[1] and a[2] == b[2] end

-- A fresh state of l that has used `used` units now (carry.c's conversion).
local function carried_over(l, used)
  local s = A[l.algo].fresh()
  if used > 0 then A[l.algo].take(l, s, math.min(used, l.burst), true) end
  return s
end

-- The state a decision under l reads from the key's entry (sluice.h's
-- "Carried states", carry.c's sl_state_adopt and sl_carry_enter):
-- returns s and how it came: 'own' (the entry's state, written back when a
-- take changes it), 'adopted' (read from another limit's state, written back
-- with the decision), or 'carried' (a state named by another limit of this
-- algorithm, carried over in units: written only when a take admits; a
-- refusal then says when the old state lets go), with that limit and state.
local function enter(l, e)
  local st = e.st
  if not st then return A[l.algo].fresh(), 'own' end
  local same = st.algo == l.algo
  if st.tag then
    if l.carried and same and same_tag(st.tag, l.tag) then return st.s, 'own' end
    if same and l.algo == 'sliding_log' then return log.resize(l, st.s), 'adopted' end
    local from = tag_limit(st.algo, st.tag)
    if not from or l.algo == 'concurrency' then return nil, 'wrongtype' end
    local s = carried_over(l, A[st.algo].used(from, st.s))
    if same and l.carried then return s, 'carried', from, st.s end
    return s, 'adopted'
  end
  if same then
    -- A log or leases of another limit (another size, to the module): the
    -- newest stamps, the live leases when they fit, written back as this
    -- limit's with the decision.
    local resized = (l.algo == 'sliding_log' or l.algo == 'concurrency') and st.s.cap ~= l.limit
    if resized and l.algo == 'concurrency' then
      local live, in_flight = conc_live(st.s)
      if #live > l.limit or in_flight > l.limit then return nil, 'wrongtype' end
    end
    if resized then return A[l.algo].resize(l, st.s), 'adopted' end
    return st.s, l.carried and 'adopted' or 'own'
  end
  -- Another algorithm's ad-hoc state: a policy's limit reads it as that
  -- algorithm under its own limit and period (a sliding log under the limit
  -- it was written with), and carries its units over; an ad-hoc limit cannot.
  if not l.carried or st.algo == 'concurrency' or l.algo == 'concurrency' then
    return nil, 'wrongtype'
  end
  local lim = st.algo == 'sliding_log' and st.s.cap or l.limit
  local from = lim and carry_limit(st.algo, string.format('%.0f', lim), lim, l.tag[2], l.period)
  if not from then return nil, 'wrongtype' end
  return carried_over(l, A[st.algo].used(from, st.s)), 'adopted'
end

-- Decides item l (cost l.cost) on the key's entry e; with commit, an admitted
-- take becomes the entry's state (e.dirty: to be written).
local function decide(l, e, commit)
  local s, how, from, old = enter(l, e)
  if not s then return nil, how end
  if e.own == nil then e.own = how ~= 'adopted' end
  local alg = A[l.algo]
  -- A take of 0 peeks, as sl_take's: it leaves the state as it was read (a
  -- debt beyond this limit's tolerance too, which the decision refuses).
  local d = alg.take(l, s, l.cost, commit and l.cost > 0)
  if how == 'carried' and not d.allowed and d.retry ~= NEVER then
    d.retry = math.max(d.retry, A[l.algo].wait(from, old, l.burst - l.cost))
    d.reset = math.max(A[l.algo].expires(from, old), 0)
  end
  -- An adopted state is written by an admitted take of several keys (the
  -- store's take_many replaces it), but by a take of one key only when it
  -- consumed something (the store's take: a take of 0 leaves a state of
  -- another shape as it was).
  if commit and ((d.allowed and l.cost > 0) or (how == 'adopted' and #KEYS > 1)) then
    e.st = {algo = l.algo, tag = l.carried and l.tag or nil, s = s, limit = l}
    e.dirty = true
  elseif e.st then
    e.st.limit = l
  end
  return d
end

local function reply(failed, ds)
  local out = {failed}
  for _, d in ipairs(ds) do
    out[#out + 1] = d.allowed and 1 or 0
    out[#out + 1] = d.limit
    out[#out + 1] = d.remaining
    out[#out + 1] = d.allowed and 0 or (d.retry == NEVER and -1 or d.retry)
    out[#out + 1] = d.reset
    out[#out + 1] = d.delay
  end
  return out
end

-- ---- the ops ----

local function op_reset()
  for _, key in ipairs(KEYS) do -- every key is checked before any is deleted
    local _, e = load(key)
    if e and e ~= 'wrongtype' then return fail(e) end -- a sync record goes too
  end
  local held = 0
  for _, key in ipairs(KEYS) do held = held + redis.call('DEL', key) end
  return held
end

-- sl_state_size of the module's states: a repeated key is one shape when its
-- items agree on the algorithm and this, as the module checks it.
local INNER_SIZE = {gcra = 16, leaky_bucket = 16, token_bucket = 16, fixed_window = 16,
                    sliding_window = 24}
local function state_size(l)
  local inner = INNER_SIZE[l.algo] or (l.algo == 'sliding_log' and 16 + 8 * l.limit) or
                24 + 24 * l.limit
  return inner + (l.carried and 16 or 0)
end

local function op_take(limits)
  local entries, ds, failed = {}, {}, -1
  for i, key in ipairs(KEYS) do
    local seen = entries[key]
    if seen then -- a repeated key: its takes add up, under one shape
      local a, b = seen.first, limits[i]
      if a.algo ~= b.algo or state_size(a) ~= state_size(b) then return fail('argument') end
    else -- read in order, so that the first key that cannot be read is the error
      local e, err = load(key)
      if not e then return fail(err) end
      local s
      s, err = enter(limits[i], e)
      if not s then return fail(err) end
      e.first = limits[i]
      entries[key] = e
    end
  end
  for i, key in ipairs(KEYS) do
    local d, err = decide(limits[i], entries[key], true)
    if not d then return fail(err) end
    ds[i] = d
    if not d.allowed and failed < 0 then failed = i - 1 end
  end
  if failed < 0 then
    for key, e in pairs(entries) do
      if e.dirty then store(key, e) end
    end
  end
  return reply(failed, ds)
end

local function op_peek(limits)
  local ds, failed = {}, -1
  for i, key in ipairs(KEYS) do
    local e, err = load(key)
    if not e then return fail(err) end
    local d
    d, err = decide(limits[i], e, false)
    if not d then return fail(err) end
    ds[i] = d
    if not d.allowed and failed < 0 then failed = i - 1 end
  end
  return reply(failed, ds)
end

local function op_acquire(l, id)
  if l.cost < 1 or l.cost > l.limit then
    return fail('ERR weight must be between 1 and max_in_flight')
  end
  local e, err = load(KEYS[1])
  if not e then return fail(err) end
  local s, how = enter(l, e)
  if not s then return fail(how) end
  e.own = how ~= 'adopted'
  if conc.held(s, id) then return fail('argument') end -- ids tell a key's leases apart
  local d = conc.acquire(l, s, l.cost, id, true)
  -- A refused acquire leaves a state of another shape as it was, as the
  -- store's does.
  if d.allowed or how ~= 'adopted' then
    e.st = {algo = 'concurrency', s = s, limit = l}
    store(KEYS[1], e)
  end
  return reply(d.allowed and -1 or 0, {d})
end

local function op_release(l, id)
  local e, err = load(KEYS[1])
  if not e then return fail(err) end
  if not e.st then return 0 end
  local s, how = enter(l, e)
  if not s then return fail(how) end
  if e.st.algo ~= 'concurrency' or e.st.s.cap ~= l.limit then return 0 end -- no lease of this shape
  local released = conc.release(s, id)
  e.st.limit = l
  e.own = true
  store(KEYS[1], e)
  return released
end

-- A take given back (sl_refund), to a state of the limit's own shape only:
-- an absent key, or a state another limit or algorithm wrote, gets nothing.
local function op_refund(l)
  local e, err = load(KEYS[1])
  if not e then return fail(err) end
  local st = e.st
  if not st or st.algo ~= l.algo or (l.carried and not same_tag(st.tag, l.tag)) or
     (not l.carried and st.tag) or (l.algo == 'sliding_log' and st.s.cap ~= l.limit) or
     l.cost == 0 then
    return 0
  end
  local given = A[l.algo].refund(l, st.s, l.cost)
  if given > 0 then
    st.limit = l
    e.own = true -- a state of this limit's shape (checked above): store may delete it
    store(KEYS[1], e)
  end
  return given
end

-- A take charged after the fact (sl_charge): never refused, so a state of
-- another shape is carried over and replaced, as an admitted take replaces
-- it; a charge of 0 writes nothing. The answer is a decision as TAKE's:
-- remaining and reset as a peek of 0 reads them, retry as a peek of 1 (the
-- reply says 0 for it, as for every admitted decision).
local function op_charge(l)
  local e, err = load(KEYS[1])
  if not e then return fail(err) end
  local s, how = enter(l, e)
  if not s then return fail(how) end
  local alg = A[l.algo]
  if not alg.charge then return fail(CHARGE_LOG_ERR) end
  if e.own == nil then e.own = how ~= 'adopted' end
  if l.cost > 0 then alg.charge(l, s, l.cost) end
  local d, next = alg.take(l, s, 0, false), alg.take(l, s, 1, false)
  d.allowed, d.retry, d.delay = true, next.allowed and 0 or next.retry, 0
  if l.cost > 0 then
    e.st = {algo = l.algo, tag = l.carried and l.tag or nil, s = s, limit = l}
    store(KEYS[1], e)
  end
  return reply(-1, {d})
end

-- ---- the sync strategy's central: op SYNC (src/algo/quota.c) ----
--
-- sl_quota_sync, ported rule for rule. Its products reach 2^115 (a time span
-- of up to 2^62 ns times a rate below 2^53), beyond what a double holds:
-- they are kept as wide integers, tables of 24-bit limbs, least significant
-- first ({l1, l2, ...} is l1 + l2 * 2^24 + ...), never negative, with no
-- zero limb on top. Every sum and product of two limbs stays below 2^53, so
-- every step below is exact. A time (Unix nanoseconds, up to 2^62) is a
-- pair {seconds, nanoseconds beyond}, which its decimal text splits into at
-- its ninth digit from the right; a span between two times is a number
-- while it stays below 2^53 ns (104 days), else a wide integer.
--
-- The section is one function, run by op SYNC alone: the script's top runs
-- on every call, and the other ops need not build these helpers each time.
local function sync_section()
  local LIMB = 16777216               -- 2^24
  local TWO53 = 9007199254740992      -- 2^53: every integer below is a double
  local SCALE = 65536                 -- quota.h's SL_QUOTA_SCALE: sub-units per unit
  local NODES_MAX = 16                -- SL_QUOTA_NODES_MAX
  local LEASES = 3                    -- SL_QUOTA_LEASES: intervals a lease lives
  local UNITS_MAX = 17592186044416    -- SL_QUOTA_UNITS_MAX (2^44)
  local SYNC_UNITS_MAX = 137438953471 -- 2^37 - 1: this script's limit, burst and admitted
  local SYNC_SPAN_MAX = 9007199254740991 -- 2^53 - 1: this script's period, interval, length
  local DEBT_MAX = TWO53              -- the deepest debt recorded (the C's: 2^61)
  local TIME_MAX_TEXT = '4611686018427387903' -- sluice.h's SL_TIME_MAX (2^62 - 1)
  local TIME_MAX = {4611686018, 427387903}
  local SEC = 1000000000

  -- n, an integer in [0, 2^53], as a wide integer.
  local function wide(n)
    local w, i = {}, 0
    while n > 0 do
      local l = math.fmod(n, LIMB)
      i = i + 1
      w[i] = l
      n = (n - l) / LIMB
    end
    return w
  end

  local function wide_trim(w)
    while #w > 0 and w[#w] == 0 do w[#w] = nil end
    return w
  end

  -- The value of w as a double: exact below 2^53, and at least 2^53 above
  -- (rounding never goes below a double it passed).
  local function wide_num(w)
    local v = 0
    for i = #w, 1, -1 do v = v * LIMB + w[i] end
    return v
  end

  local function wide_cmp(a, b)
    for i = math.max(#a, #b), 1, -1 do
      local x, y = a[i] or 0, b[i] or 0
      if x ~= y then return x < y and -1 or 1 end
    end
    return 0
  end

  local function wide_add(a, b)
    local s, carry = {}, 0
    for i = 1, math.max(#a, #b) do
      local t = (a[i] or 0) + (b[i] or 0) + carry
      if t >= LIMB then s[i], carry = t - LIMB, 1 else s[i], carry = t, 0 end
    end
    if carry > 0 then s[#s + 1] = carry end
    return s
  end

  -- a - b, for a >= b.
  local function wide_sub(a, b)
    local s, borrow = {}, 0
    for i = 1, #a do
      local t = a[i] - (b[i] or 0) - borrow
      if t < 0 then s[i], borrow = t + LIMB, 1 else s[i], borrow = t, 0 end
    end
    return wide_trim(s)
  end

  -- a * m, for an integer m in [0, 2^53]: each step adds a product of two
  -- limbs (below 2^48) to a limb and a carry, below 2^49.
  local function wide_mul(a, m)
    local b, p = wide(m), {}
    for k = 1, #a + #b do p[k] = 0 end
    for i = 1, #a do
      local carry = 0
      for j = 1, #b do
        local t = p[i + j - 1] + a[i] * b[j] + carry
        local l = math.fmod(t, LIMB)
        p[i + j - 1] = l
        carry = (t - l) / LIMB
      end
      p[i + #b] = carry
    end
    return wide_trim(p)
  end

  -- The bits of a limb, from the top.
  local BITS = {}
  for k = 23, 0, -1 do BITS[#BITS + 1] = 2 ^ k end

  -- floor(a / d) as a wide integer and a mod d, for an integer d in [1, 2^53).
  -- A divisor up to 2^29 takes a limb at a time (r * 2^24 + limb stays below
  -- 2^53); a larger one a bit at a time, where the remainder r < d doubles
  -- without ever being formed above d: 2r + b >= d exactly when r >= d - r - b.
  local function wide_divmod(a, d)
    local q, r = {}, 0
    for i = #a, 1, -1 do
      local x, ql = a[i], 0
      if d <= 536870912 then
        local t = r * LIMB + x
        r = math.fmod(t, d)
        ql = (t - r) / d
      else
        for _, bit in ipairs(BITS) do
          local b = 0
          if x >= bit then b, x = 1, x - bit end
          local gap = d - r - b
          if r >= gap then r, ql = r - gap, ql + bit else r = r + r + b end
        end
      end
      q[i] = ql
    end
    return wide_trim(q), r
  end

  -- floor((a * b + c) / d) and its remainder, exactly, for a >= 0 (a number
  -- below 2^53 or a wide integer), b and c in [0, 2^53] and d in [1, 2^53):
  -- quota.c's quota_accrue and quota_share. The quotient comes back as a
  -- number (exact below 2^53, else at least 2^53: the C's saturation at 2^61,
  -- where only its comparison with a budget below 2^53 matters) and, when it
  -- was computed wide, as the wide integer too. Below 2^53 the double product
  -- is exact, and fmod always is.
  local function muldiv(a, b, c, d)
    if type(a) == 'table' then
      local v = wide_num(a)
      if v < TWO53 then a = v end
    end
    if type(a) == 'number' then
      local p = a * b
      if p < TWO53 then
        p = p + c
        if p < TWO53 then
          local r = math.fmod(p, d)
          return (p - r) / d, r
        end
      end
      a = wide(a)
    end
    local q, r = wide_divmod(wide_add(wide_mul(a, b), wide(c)), d)
    return wide_num(q), r, q
  end

  -- A decimal integer as a time, the nearest within [0, SL_TIME_MAX] (as
  -- quota.c reads a state's times).
  local function time_of_text(text)
    if string.byte(text, 1) == 45 then return {0, 0} end -- '-'
    local digits = text
    if #text > 9 and string.byte(text, 1) == 48 then digits = string.gsub(text, '^0+', '') end
    if #digits > #TIME_MAX_TEXT or (#digits == #TIME_MAX_TEXT and digits > TIME_MAX_TEXT) then
      return {TIME_MAX[1], TIME_MAX[2]}
    end
    if #digits <= 9 then return {0, tonumber(digits) or 0} end
    return {tonumber(string.sub(digits, 1, -10)), tonumber(string.sub(digits, -9))}
  end

  local function time_text(t)
    if t[1] == 0 then return string.format('%.0f', t[2]) end
    return string.format('%.0f%09.0f', t[1], t[2])
  end

  local function time_cmp(a, b)
    if a[1] ~= b[1] then return a[1] < b[1] and -1 or 1 end
    if a[2] ~= b[2] then return a[2] < b[2] and -1 or 1 end
    return 0
  end

  -- The span from t to now in ns, 0 when now is not later: a number below
  -- 2^53 (9007198 s and up to a second more stay below), else a wide integer.
  local function since(now, t)
    if time_cmp(now, t) <= 0 then return 0 end
    local ds, dn = now[1] - t[1], now[2] - t[2]
    if ds <= 9007198 then return ds * SEC + dn end
    if dn < 0 then ds, dn = ds - 1, dn + SEC end
    return wide_add(wide_mul(wide(ds), SEC), wide(dn))
  end

  -- Is span (as since() gives it) below the integer d? d is given as a double
  -- (exact below 2^53, at least 2^53 above, which no number span reaches),
  -- and as d_wide when it may lie above 2^53.
  local function span_below(span, d, d_wide)
    if type(span) == 'number' then return span < d end
    return wide_cmp(span, d_wide or wide(d)) < 0
  end

  -- The time span ns (a number or a wide integer) after t, saturated at
  -- SL_TIME_MAX.
  local function time_after(t, span)
    local s, n
    if type(span) == 'number' then
      n = math.fmod(span, SEC)
      s = (span - n) / SEC
    else
      local q
      q, n = wide_divmod(span, SEC)
      s = wide_num(q) -- beyond 2^53 s, far beyond SL_TIME_MAX
    end
    s, n = t[1] + s, t[2] + n
    if n >= SEC then s, n = s + 1, n - SEC end
    local out = {s, n}
    return time_cmp(out, TIME_MAX) > 0 and {TIME_MAX[1], TIME_MAX[2]} or out
  end

  local function between(v, lo, hi) return v < lo and lo or (v > hi and hi or v) end

  -- floor(a / b) for integers a >= 0 below 2^53 and b > 0, as C divides.
  local function idiv(a, b) return (a - math.fmod(a, b)) / b end

  -- A zeroed sl_quota_central: a key never seen.
  local function sync_fresh()
    local s = {seen = 0, first = {0, 0}, remaining = 0, anchor = {0, 0}, frac = 0, node = {}}
    for j = 1, NODES_MAX do
      s.node[j] = {synced_at = {0, 0}, demand = 0, hold = 0, rate = 0, carry = 0}
    end
    return s
  end

  -- The key's sync record, a fresh one when it is absent, or an error:
  -- 'foreign' for a value that is no state of the script's (nor a well-formed
  -- sync record), 'wrongtype' for a state of one of its algorithms.
  local function sync_load(key)
    local v = redis.pcall('GET', key)
    if type(v) == 'table' then return nil, 'foreign' end -- a hash, a list...
    if not v then return sync_fresh() end
    if string.sub(v, 1, #PREFIX) ~= PREFIX then return nil, 'foreign' end
    local f, n = sync_record(string.sub(v, #PREFIX + 1))
    if not f then
      local alg, tag = string.match(v, '^%s*(%S+)%s+(%S+)%s+%S', #PREFIX + 1) -- as load reads
      if alg and A[alg] and tag then return nil, 'wrongtype' end
      return nil, 'foreign'
    end
    local s = {seen = n[1], first = time_of_text(f[2]), remaining = n[3],
               anchor = time_of_text(f[4]), frac = n[5], node = {}}
    for j = 1, NODES_MAX do
      local at = 5 * j
      s.node[j] = {synced_at = time_of_text(f[at + 1]), demand = n[at + 2], hold = n[at + 3],
                   rate = n[at + 4], carry = n[at + 5]}
    end
    return s
  end

  -- The record's text, in one format (times already as text).
  local RECORD = PREFIX .. 'sync %.0f %s %.0f %s %.0f' ..
                 string.rep(' %s %.0f %.0f %.0f %.0f', NODES_MAX)
  local function sync_encode(s)
    local v = {s.seen, time_text(s.first), s.remaining, time_text(s.anchor), s.frac}
    for j = 1, NODES_MAX do
      local o, at = s.node[j], 5 * j
      v[at + 1], v[at + 2], v[at + 3] = time_text(o.synced_at), o.demand, o.hold
      v[at + 4], v[at + 5] = o.rate, o.carry
    end
    return string.format(RECORD, unpack(v))
  end

  -- quota_central_clamp: every field into the range the rules keep it in (a
  -- record written under another limit, or text no sync wrote), the times
  -- already (time_of_text).
  local function sync_clamp(c, s)
    if s.seen ~= 0 and s.seen ~= 1 then s.seen = 1 end
    s.remaining = between(s.remaining, -DEBT_MAX, c.burst)
    s.frac = between(s.frac, 0, c.period - 1)
    for j = 1, NODES_MAX do
      local o = s.node[j]
      o.demand = between(o.demand, 0, UNITS_MAX + 1)
      o.hold = between(o.hold, 0, c.burst)
      o.rate = between(o.rate, 0, c.rate)
      o.carry = between(o.carry, 0, SCALE)
    end
  end

  -- quota_live: slot o has synced, less than a lease ago.
  local function sync_live(c, o, now)
    return o.demand > 0 and span_below(since(now, o.synced_at), c.lease, c.lease_wide)
  end

  -- quota_entitled: what slot o may still spend of its lease by now, at most.
  -- Below 2^53 exact; above, at least 2^53, which no budget reaches.
  local function sync_entitled(c, o, now)
    return o.hold + o.carry + muldiv(since(now, o.synced_at), o.rate, 0, c.period)
  end

  -- sl_quota_sync: report r at now (a time) on state s under config c;
  -- returns the grant, hold and rate. The arguments are in range (checked by
  -- op_sync), so it cannot refuse.
  --
  -- Every sum below is of integers below 2^53 and exact while it stays below;
  -- a sum that passes 2^53 rounds to a double at least 2^53, above every
  -- budget, so that each comparison comes out as the C's. remaining lies in
  -- [-2^53, burst], and a charge in [-65536, 2^53], so remaining - charge
  -- rounds only below -2^53, where it is clamped anyway.
  local function sync_step(c, s, now, r)
    sync_clamp(c, s)
    -- 1. Charge what the node admitted (and its carry's change), then refill.
    if s.seen == 0 then
      s.seen, s.remaining, s.anchor, s.frac, s.first = 1, c.burst, now, 0, now
    end
    local me = s.node[r.node + 1]
    local charge = r.admitted * SCALE + (r.carry - me.carry)
    s.remaining = between(s.remaining - charge, -DEBT_MAX, c.burst)
    me.carry = r.carry
    if time_cmp(now, s.anchor) > 0 then
      local add, frac, wadd = muldiv(since(now, s.anchor), c.rate, s.frac, c.period)
      s.anchor = now
      local left -- the budget after the refill, when it stays below the brim
      if add < TWO53 then
        left = s.remaining + add -- at least 2^53, so above the brim, when it rounds
      elseif s.remaining < 0 then
        -- a refill beyond 2^53 that a debt beyond 2^53 - burst may still absorb
        local missing = wide_add(wide(c.burst), wide(-s.remaining))
        if wide_cmp(wadd, missing) < 0 then left = wide_num(wide_sub(wadd, wide(-s.remaining))) end
      end
      if left and left < c.burst then
        s.remaining, s.frac = left, frac
      else
        s.remaining, s.frac = c.burst, 0 -- the part beyond the brim is lost
      end
    end

    -- 2. Release the node's old lease; record its demand per interval, plus 1.
    -- Was the static share kept for it (a key younger than an interval it
    -- had not synced)? Then its first lease holds at least that.
    local reserved = me.demand == 0 and r.node < c.nodes and
                     span_below(since(now, s.first), c.interval)
    local per = r.asked
    if r.length > 0 then per = muldiv(r.asked, c.interval, 0, r.length) end
    me.synced_at, me.demand, me.hold, me.rate = now, math.min(per, UNITS_MAX) + 1, 0, 0

    -- 3. What the other live leases may still spend, their rates, the demand;
    -- a node that has not synced a key younger than an interval keeps its
    -- static share; slots whose lease ran out are cleared.
    local others, others_rate, demand = 0, 0, 0
    for j = 1, NODES_MAX do
      local o = s.node[j]
      if j == r.node + 1 then
        -- the node itself
      elseif o.demand == 0 then
        local age = since(now, s.first)
        if j <= c.nodes and span_below(age, c.interval) then
          others = others + c.brim + muldiv(age, c.share_rate, 0, c.period)
          others_rate = others_rate + c.share_rate
        end
      elseif not sync_live(c, o, now) then
        o.hold, o.rate, o.demand = 0, 0, 0
      else
        others = others + sync_entitled(c, o, now)
        others_rate = others_rate + o.rate
        demand = demand + o.demand
      end
    end
    demand = demand + me.demand -- at most 16 * (2^44 + 1)

    -- 4 and 5. The node's share of the demand: of what the others leave of
    -- the budget, in whole units (at least one when it asked and one is
    -- free, at least the static share kept for it on its first sync of a
    -- young key), and of the rate, within what the others' rates leave.
    local avail = s.remaining - others
    local hold = 0
    if avail > 0 then
      hold = muldiv(avail, me.demand, 0, demand)
      if r.asked > 0 and hold < SCALE then hold = SCALE end
      if reserved and hold < c.brim then hold = c.brim end
      if hold > avail then hold = avail end
      hold = hold - math.fmod(hold, SCALE)
    end
    local rate = muldiv(c.rate, me.demand, 0, demand)
    local free = c.rate - others_rate
    if rate > free then rate = free > 0 and free or 0 end
    me.hold, me.rate = hold, rate
    return hold, rate
  end

  -- The PXAT of a record: Unix milliseconds, rounded up, of the moment it is
  -- as good as never seen, the latest of every lease's end (synced_at + lease
  -- for each slot with a demand) and of the budget's return to the brim,
  -- anchor + ceil((burst - remaining) * period / rate). The refill's
  -- remainder (frac) is left out: the moment is then up to period / rate ns
  -- late, never early. Saturated at SL_TIME_MAX.
  local function sync_expiry(c, s)
    local missing = s.remaining >= 0 and c.burst - s.remaining or
                    wide_add(wide(c.burst), wide(-s.remaining))
    local q, rem, wq = muldiv(missing, c.period, 0, c.rate)
    local back -- ceil(missing * period / rate): a number below 2^53, else wide
    if q < TWO53 then
      back = rem > 0 and q + 1 or q
    else
      back = rem > 0 and wide_add(wq, {1}) or wq
    end
    local at = time_after(s.anchor, back)
    local lease = c.lease < TWO53 and c.lease or c.lease_wide
    for j = 1, NODES_MAX do
      local o = s.node[j]
      if o.demand > 0 then
        local e = time_after(o.synced_at, lease)
        if time_cmp(e, at) > 0 then at = e end
      end
    end
    local rest = math.fmod(at[2], 1000000)
    return at[1] * 1000 + (at[2] - rest) / 1000000 + (rest > 0 and 1 or 0)
  end

  -- SL.SYNC's integer arguments in order, with this script's ranges (the top
  -- says why some are narrower than the module's): name, lo, hi; node's hi
  -- is nodes - 1, asked's lo the admitted value given.
  local SYNC_ARGS = {
    {'limit', 1, SYNC_UNITS_MAX}, {'period_ns', 1, SYNC_SPAN_MAX}, {'burst', 0, SYNC_UNITS_MAX},
    {'interval_ns', 1, SYNC_SPAN_MAX}, {'nodes', 1, NODES_MAX}, {'node', 0, 0},
    {'admitted', 0, SYNC_UNITS_MAX}, {'asked', 0, UNITS_MAX}, {'length_ns', 0, SYNC_SPAN_MAX},
    {'carry', 0, SCALE},
  }
  local RATES = {gcra = true, token_bucket = true, leaky_bucket = true}

  -- SYNC 0 algorithm limit period_ns burst interval_ns nodes node admitted
  -- asked length_ns carry [AT unix_ns]: {hold, rate, remaining}.
  local function op_sync()
    if ARGV[2] ~= '0' then
      return fail('ERR syntax error: the lease is 16 hex digits for ACQUIRE and RELEASE, else 0')
    end
    if #KEYS ~= 1 then return fail('ERR numkeys must be 1 for SYNC') end
    if #ARGV < 13 then return fail("ERR wrong number of arguments for 'sl.sync' command") end
    local name = string.lower(ARGV[3])
    if not RATES[name] then
      -- sl_algorithm_parse's names; "cell" is SL.DECIDE's alone
      if ALGORITHMS[name] and name ~= 'cell' then
        return fail('ERR sync leases rates only: gcra, token_bucket or leaky_bucket')
      end
      return fail('algorithm')
    end
    local v = {}
    for i, arg in ipairs(SYNC_ARGS) do
      local lo, hi = arg[2], arg[3]
      if arg[1] == 'node' then hi = v[5] - 1 elseif arg[1] == 'asked' then lo = v[7] end
      local n = int_arg(ARGV[3 + i])
      if not n or n < lo or n > hi then
        return fail(string.format('ERR %s must be an integer from %.0f to %.0f', arg[1], lo, hi))
      end
      v[i] = n
    end
    local now
    if #ARGV == 13 then
      local us = math.fmod(NOW, 1000000)
      now = {(NOW - us) / 1000000, us * 1000}
    elseif #ARGV == 15 and string.upper(ARGV[14]) == 'AT' then
      local n = int_arg(ARGV[15])
      if not n or n < 0 or above_span(ARGV[15], n, TIME_MAX_TEXT) then
        return fail('ERR AT must be an integer from 0 to ' .. TIME_MAX_TEXT)
      end
      now = time_of_text(ARGV[15])
    else
      return fail('ERR syntax error')
    end

    -- sl_quota_config_init (a burst of 0 is the limit); the lease, 3
    -- intervals, as a double (exact below 2^53, at least 2^53 above: see
    -- span_below) and as a wide integer
    local limit, burst, nodes = v[1], v[3] == 0 and v[1] or v[3], v[5]
    local c = {rate = limit * SCALE, period = v[2], burst = burst * SCALE, interval = v[4],
               lease = LEASES * v[4], lease_wide = wide_mul(wide(v[4]), LEASES), nodes = nodes,
               share_rate = idiv(limit * SCALE, nodes), brim = idiv(burst, nodes) * SCALE}
    local s, err = sync_load(KEYS[1])
    if not s then return fail(err) end
    local hold, rate = sync_step(c, s, now,
                                 {node = v[6], admitted = v[7], asked = v[8], length = v[9],
                                  carry = v[10]})
    redis.call('SET', KEYS[1], sync_encode(s), 'PXAT', string.format('%.0f', sync_expiry(c, s)))
    return {hold, rate, s.remaining}
  end

  return {op_sync = op_sync, muldiv = muldiv} -- muldiv: for the tests
end

local OPS = {TAKE = true, PEEK = true, RESET = true, ACQUIRE = true, RELEASE = true,
             REFUND = true, CHARGE = true}

-- CLAIM: a sync node's id in its fleet (docs/commands.md), sent with the module loaded or
-- not. KEYS[1] is the fleet's registry, a hash of id -> "token expiry_ms" for ids 0 to 15;
-- ARGV is CLAIM 0 token ttl_ms. The id the token holds is renewed, else the lowest id
-- free or expired is taken, for ttl_ms. Reply {id, nodes}: nodes is 1 + the highest id
-- live; id is -1 when all 16 are held by others. The hash expires twice the longest
-- ttl after its last claim.
local function op_claim()
  if #KEYS ~= 1 or #ARGV ~= 4 then
    return fail("ERR wrong number of arguments for CLAIM (key token ttl_ms)")
  end
  local token, ttl = ARGV[3], ARGV[4]
  if #token < 1 or #token > 64 or string.find(token, '%s') then
    return fail('ERR CLAIM: the token is 1 to 64 bytes, no spaces')
  end
  if not string.match(ttl, '^[1-9]%d?%d?%d?%d?%d?%d?%d?$') then
    return fail('ERR CLAIM: ttl_ms must be an integer from 1 to 99999999')
  end
  ttl = tonumber(ttl)
  local now = math.floor(NOW / 1000)
  local mine, free, top = nil, nil, -1
  for id = 0, 15 do
    local v = redis.call('HGET', KEYS[1], tostring(id))
    local t, exp = nil, nil
    if v then t, exp = string.match(v, '^(%S+) (%d+)$') end
    if t == token then
      mine = id
    elseif t and tonumber(exp) > now then
      top = id
    elseif not free then
      free = id
    end
  end
  local id = mine or free
  if not id then return {-1, top + 1} end
  redis.call('HSET', KEYS[1], tostring(id), token .. ' ' .. tostring(now + ttl))
  -- The hash outlives every claim in it by a ttl, and is never shortened by a short one.
  if redis.call('PTTL', KEYS[1]) < 2 * ttl then redis.call('PEXPIRE', KEYS[1], 2 * ttl) end
  if id > top then top = id end
  return {id, top + 1}
end

local function main()
  if string.upper(ARGV[1] or '') == 'SYNC' then return sync_section().op_sync() end
  if string.upper(ARGV[1] or '') == 'CLAIM' then return op_claim() end
  -- Redis's own arity check of SL.DECIDE (op lease numkeys key, at least)
  if 2 + #KEYS + #ARGV < 5 then
    return fail("ERR wrong number of arguments for 'sl.decide' command")
  end
  local op = string.upper(ARGV[1] or '')
  if not OPS[op] then
    return fail("ERR syntax error: SL.DECIDE's op is TAKE, PEEK, RESET, ACQUIRE, RELEASE, " ..
                "REFUND or CHARGE")
  end
  local leased = op == 'ACQUIRE' or op == 'RELEASE'
  local lease = ARGV[2] or ''
  if leased and not (#lease == 16 and string.match(lease, '^%x+$') and
                     not string.match(lease, '^0+$')) or (not leased and lease ~= '0') then
    return fail('ERR syntax error: the lease is 16 hex digits for ACQUIRE and RELEASE, else 0')
  end
  local n, max = #KEYS, (leased or op == 'REFUND' or op == 'CHARGE') and 1 or 8
  if n < 1 or n > max then return fail('ERR numkeys must be between 1 and ' .. max) end
  local groups = op == 'RESET' and 0 or n
  if #ARGV ~= 2 + 8 * groups then
    return fail("ERR wrong number of arguments for 'sl.decide' command")
  end
  if op == 'RESET' then return op_reset() end
  local limits = {}
  for k = 1, n do
    local l, e = parse_group(3 + 8 * (k - 1))
    if not l then return fail(e) end
    if (l.algo == 'concurrency') ~= leased then
      return fail('ERR syntax error: ACQUIRE and RELEASE take a concurrency limit, the other ' ..
                  'ops any other')
    end
    limits[k] = l
  end
  if op == 'TAKE' then return op_take(limits) end
  if op == 'PEEK' then return op_peek(limits) end
  if op == 'ACQUIRE' then return op_acquire(limits[1], string.lower(lease)) end
  if op == 'REFUND' then return op_refund(limits[1]) end
  if op == 'CHARGE' then return op_charge(limits[1]) end
  return op_release(limits[1], string.lower(lease))
end

local out = main()
if type(out) == 'table' and out.err then return redis.error_reply(out.err) end
return out
