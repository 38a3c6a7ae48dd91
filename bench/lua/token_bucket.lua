-- A classic token bucket in a Redis hash: the way rate limiting is done on Redis today,
-- and what bench/resp_compare.sh compares sluiced's CL.THROTTLE against.
--
-- EVALSHA sha 1 KEY capacity tokens_per_period period_ms cost
-- Returns {allowed (1/0), tokens left (floor), retry_after_ms (0 when allowed; -1 never)}.
--
-- Time comes from the Redis server (TIME), not from the caller: every app server sees
-- the same clock. The hash holds the tokens (a float) and the time of the last update
-- (microseconds); it expires when the bucket would be full again, so idle keys vanish.
local capacity = tonumber(ARGV[1])
local per_us = tonumber(ARGV[2]) / (tonumber(ARGV[3]) * 1000) -- tokens per microsecond
local cost = tonumber(ARGV[4])

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])

local state = redis.call('HMGET', KEYS[1], 'tokens', 'ts')
local tokens = tonumber(state[1])
local ts = tonumber(state[2])
if tokens == nil or ts == nil then
  tokens = capacity
  ts = now
end
if now > ts then
  tokens = math.min(capacity, tokens + (now - ts) * per_us)
end

local allowed = 0
local retry_after_ms = 0
if cost > capacity then
  retry_after_ms = -1
elseif tokens >= cost then
  tokens = tokens - cost
  allowed = 1
else
  retry_after_ms = math.ceil((cost - tokens) / per_us / 1000)
end

redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'ts', now)
local full_in_ms = math.ceil((capacity - tokens) / per_us / 1000)
redis.call('PEXPIRE', KEYS[1], math.max(full_in_ms, 1))
return {allowed, math.floor(tokens), retry_after_ms}
