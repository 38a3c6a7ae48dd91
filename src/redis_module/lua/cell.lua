-- cell.lua: CL.THROTTLE as a Lua script, for Redis servers that cannot load
-- sluice-redis.so (managed Redis). Same arithmetic as src/algo/gcra.c in
-- redis-cell mode, in microseconds (Lua numbers are doubles: Unix time in
-- microseconds is exact in them, in nanoseconds it is not).
--
--   EVALSHA <sha> 1 key max_burst count_per_period period [quantity]
--   -> {limited, limit, remaining, retry_after_s, reset_after_s}
--
-- State: the string "g:<TAT in Unix microseconds>", expiring at the TAT, so it
-- is shared with gcra.lua (the same algorithm) and with nothing else.
-- The clock is the Redis server's (TIME); Redis 7 replicates a script's
-- effects (the SET below), never the script, so replicas hold the same state.
if #ARGV < 3 or #ARGV > 4 then
  return redis.error_reply("ERR wrong number of arguments for 'cl.throttle' command")
end

local function int_arg(v)
  local n = tonumber(v)
  if n == nil or n ~= math.floor(n) then
    return nil, 'ERR value is not an integer or out of range'
  end
  return n
end

local max_burst, e1 = int_arg(ARGV[1])
local count, e2 = int_arg(ARGV[2])
local period, e3 = int_arg(ARGV[3])
local quantity, e4 = 1, nil
if ARGV[4] ~= nil then quantity, e4 = int_arg(ARGV[4]) end
local err = e1 or e2 or e3 or e4
if err then return redis.error_reply(err) end
-- T truncated to whole nanoseconds, as redis-cell computes it; kept in microseconds.
-- redis-cell refuses an interval of 0 (a count or a period of 0, or more than
-- one per nanosecond) in these words, without ERR, before anything else.
local t_ns = 0
if count ~= 0 and period ~= 0 then t_ns = math.floor(period * 1e9 / count) end
if t_ns == 0 then return redis.error_reply('Cell error: Zero rates are not supported') end
if quantity < 0 then return redis.error_reply('ERR cost must be a non-negative integer') end
if max_burst < 0 then
  return redis.error_reply('ERR max_burst must be an integer between 0 and 2305843009213693950')
end
if count < 0 then
  return redis.error_reply('ERR limit must be a positive integer of at most 2305843009213693951 ' ..
                           '(65536 for sliding_log)')
end
if period < 0 then return redis.error_reply('ERR period must be positive and at most 73 years') end
if t_ns < 1000 then
  return redis.error_reply('ERR rate is too high: less than one microsecond per request')
end
local t = t_ns / 1000
local limit = max_burst + 1
local tau = t * limit

local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000000 + tonumber(time[2])

local tat = 0
local v = redis.call('GET', KEYS[1])
if v and string.sub(v, 1, 2) == 'g:' then tat = tonumber(string.sub(v, 3)) or 0 end
if tat < now then tat = now end
if tat - now > tau then tat = now + tau end
local debt = tat - now

local allowed, retry = false, -1
if quantity <= limit then
  local new = debt + quantity * t
  if new <= tau + 1e-6 then
    allowed = true
    if quantity > 0 then
      tat = now + new
      redis.call('SET', KEYS[1], string.format('g:%.17g', tat), 'PXAT', math.ceil(tat / 1000))
    end
    debt = new
  else
    retry = new - tau
  end
end

-- whole seconds, plus one when the millisecond part is not zero (redis-cell's rounding)
local function seconds(us)
  local s = math.floor(us / 1e6 + 1e-9)
  local ms = math.floor((us - s * 1e6) / 1000 + 1e-9)
  if ms > 0 then s = s + 1 end
  return s
end

local remaining = math.floor(math.floor(tau - debt + 1e-6) / math.floor(t))
return {allowed and 0 or 1, limit, remaining,
        (allowed or retry < 0) and -1 or seconds(retry), seconds(debt)}
