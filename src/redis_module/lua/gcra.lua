-- gcra.lua: SL.TAKE ... ALGORITHM gcra (the default) as a Lua script, for Redis
-- servers that cannot load sluice-redis.so. Same decisions as src/algo/gcra.c,
-- in microseconds (doubles hold Unix microseconds exactly).
--
--   EVALSHA <sha> 1 key limit period_ms [burst [cost]]
--   (burst at least 1; omitted or "" for the limit, as SL.TAKE without BURST)
--   -> the decision as SL.TAKE answers a RESP2 client:
--      {"allowed", 0|1, "limit", n, "remaining", n, "retry_after_ms", n, "reset_after_ms", n}
--
-- State: "g:<TAT in Unix microseconds>", expiring at the TAT.
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

local t = period * 1000 / limit -- emission interval, microseconds
local tau = burst * t

local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000000 + tonumber(time[2])

local tat = 0
local v = redis.call('GET', KEYS[1])
if v and string.sub(v, 1, 2) == 'g:' then tat = tonumber(string.sub(v, 3)) or 0 end
if tat < now then tat = now end
if tat - now > tau then tat = now + tau end
local debt = tat - now

local allowed, retry = 0, -1
if cost <= burst then
  local new = debt + cost * t
  if new <= tau + 1e-6 then
    allowed, retry = 1, 0
    if cost > 0 then
      tat = now + new
      redis.call('SET', KEYS[1], string.format('g:%.17g', tat), 'PXAT', math.ceil(tat / 1000))
    end
    debt = new
  else
    retry = new - tau
  end
end

local function ms_ceil(us)
  if us <= 0 then return 0 end
  return math.ceil(us / 1000 - 1e-9)
end

local remaining = burst - math.ceil(debt / t - 1e-9)
return {'allowed', allowed, 'limit', burst, 'remaining', remaining,
        'retry_after_ms', retry < 0 and -1 or ms_ceil(retry), 'reset_after_ms', ms_ceil(debt)}
