-- fixed_window.lua: SL.TAKE ... ALGORITHM fixed_window as a Lua script, for Redis
-- servers that cannot load sluice-redis.so. Same decisions as
-- src/algo/fixed_window.c: windows on the wall clock as the module puts them
-- (docs/algorithms.md): multiples of the period counted from Monday
-- 1970-01-05 00:00 local time, at a UTC offset of utc_offset_s seconds
-- (default 0): a day begins at local midnight, a week on Monday. Calendar
-- months are the module's only (a period here is milliseconds).
--
--   EVALSHA <sha> 1 key limit period_ms [burst [cost [utc_offset_s]]]
--   (burst is ignored, but must be at least 1 when given, or "", as SL.TAKE's)
--   -> {"allowed", 0|1, "limit", n, "remaining", n, "retry_after_ms", n, "reset_after_ms", n}
--
-- State: "w:<window start, Unix microseconds>:<count>", expiring with the window.
local limit, period, cost = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[4] or 1)
local utc_offset = tonumber(ARGV[5] or 0)
if not limit or not period or not cost or not utc_offset then
  return redis.error_reply('ERR value is not an integer or out of range')
end
if limit <= 0 then
  return redis.error_reply('ERR limit must be a positive integer of at most 2305843009213693951 ' ..
                           '(65536 for sliding_log)')
end
if period <= 0 then return redis.error_reply('ERR period must be positive and at most 73 years') end
if cost < 0 then return redis.error_reply('ERR cost must be a non-negative integer') end
if math.abs(utc_offset) > 18 * 3600 then
  return redis.error_reply('ERR utc_offset_s must be at most 18 hours (64800 seconds) either way')
end
local burst = ARGV[3]
if burst ~= nil and burst ~= '' then
  burst = tonumber(burst)
  if not burst then return redis.error_reply('ERR value is not an integer or out of range') end
  if burst < 1 or burst ~= math.floor(burst) then
    return redis.error_reply('ERR burst must be a positive integer of at most ' ..
                             '2305843009213693951 (omit it for a burst of the limit)')
  end
end

local p = period * 1000 -- microseconds
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000000 + tonumber(time[2])

local start, count = 0, 0
local v = redis.call('GET', KEYS[1])
if v and string.sub(v, 1, 2) == 'w:' then
  local s, c = string.match(v, '^w:([^:]+):([^:]+)$')
  start, count = tonumber(s) or 0, tonumber(c) or 0
end
if count <= 0 or count > limit or now < start or now - start >= p then
  -- Windows begin where now + offset - 4 days (Monday 1970-01-05) is a
  -- multiple of p: at now = phase (mod p).
  local phase = (4 * 86400000000 - utc_offset * 1000000) % p
  start = math.floor((now - phase) / p) * p + phase
  count = 0
end

local allowed, retry = 0, -1
if cost <= limit then
  if count + cost <= limit then
    allowed, retry = 1, 0
    if cost > 0 then
      count = count + cost
      redis.call('SET', KEYS[1], string.format('w:%.17g:%d', start, count),
                 'PXAT', math.ceil((start + p) / 1000))
    end
  else
    retry = start + p - now
  end
end

local function ms_ceil(us)
  if us <= 0 then return 0 end
  return math.ceil(us / 1000 - 1e-9)
end

local reset = 0
if count > 0 then reset = start + p - now end
return {'allowed', allowed, 'limit', limit, 'remaining', limit - count,
        'retry_after_ms', retry < 0 and -1 or ms_ceil(retry), 'reset_after_ms', ms_ceil(reset)}
