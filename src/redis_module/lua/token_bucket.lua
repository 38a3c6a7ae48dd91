-- token_bucket.lua: SL.TAKE ... ALGORITHM token_bucket as a Lua script, for Redis
-- servers that cannot load sluice-redis.so. Same decisions as
-- src/algo/token_bucket.c, in microseconds.
--
--   EVALSHA <sha> 1 key limit period_ms [burst [cost]]
--   (burst at least 1; omitted or "" for the limit, as SL.TAKE without BURST)
--   -> {"allowed", 0|1, "limit", n, "remaining", n, "retry_after_ms", n, "reset_after_ms", n}
--
-- A bucket of `burst` tokens gains `limit` per period. State: "t:<anchor>:<debt>",
-- the tokens missing at the anchor (Unix microseconds); it expires when the
-- bucket is full again.
-- A burst of 0 is refused as SL.TAKE refuses BURST 0 (the library's 0 means
-- the limit; a user who writes 0 means no burst): "" stands for no burst
-- given, so that a cost can follow.
local limit, period, cost = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[4] or 1)
local burst = limit
if ARGV[3] ~= nil and ARGV[3] ~= '' then burst = tonumber(ARGV[3]) end
if not limit or not period or not burst or not cost then
  return redis.error_reply('ERR value is not an integer or out of range')
end
if limit <= 0 then
  return redis.error_reply('ERR limit must be a positive integer of at most 2305843009213693951 ' ..
                           '(65536 for sliding_log)')
end
if period <= 0 then return redis.error_reply('ERR period must be positive and at most 73 years') end
if burst < 1 or burst ~= math.floor(burst) then
  return redis.error_reply('ERR burst must be a positive integer of at most 2305843009213693951 ' ..
                           '(omit it for a burst of the limit)')
end
if cost < 0 then return redis.error_reply('ERR cost must be a non-negative integer') end

local per_token = period * 1000 / limit -- microseconds

local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000000 + tonumber(time[2])

local anchor, debt = now, 0
local v = redis.call('GET', KEYS[1])
if v and string.sub(v, 1, 2) == 't:' then
  local a, d = string.match(v, '^t:([^:]+):([^:]+)$')
  anchor, debt = tonumber(a) or now, tonumber(d) or 0
  if debt < 0 or debt > burst + limit then debt = 0 end
end

-- Refill: whole tokens only; the anchor moves by exactly the time they took,
-- so the fraction of a token accruing is kept.
local elapsed = now > anchor and now - anchor or 0
local accrued = 0
if debt > 0 then accrued = math.floor(elapsed / per_token + 1e-9) end
if accrued >= debt then
  anchor, debt = now, 0
elseif accrued > 0 then
  anchor = anchor + accrued * per_token
  debt = debt - accrued
end
local tokens = burst - debt
if tokens < 0 then tokens = 0 end

local allowed, retry = 0, -1
if cost <= burst then
  if tokens >= cost then
    allowed, retry = 1, 0
    if cost > 0 then
      debt = debt + cost
      tokens = tokens - cost
      local full_at = anchor + debt * per_token
      redis.call('SET', KEYS[1], string.format('t:%.17g:%d', anchor, debt),
                 'PXAT', math.ceil(full_at / 1000))
    end
  else
    retry = anchor + (debt + cost - burst) * per_token - now
  end
end

local function ms_ceil(us)
  if us <= 0 then return 0 end
  return math.ceil(us / 1000 - 1e-9)
end

local reset = 0
if debt > 0 then reset = anchor + debt * per_token - now end
return {'allowed', allowed, 'limit', burst, 'remaining', tokens,
        'retry_after_ms', retry < 0 and -1 or ms_ceil(retry), 'reset_after_ms', ms_ceil(reset)}
