-- sluice.lua: SL.DECIDE for a Redis without sluice-redis.so (src/backend/redis.c
-- sends it by EVALSHA: KEYS = the keys, ARGV = op, lease, then 8 arguments per key).
--
-- A placeholder until the full script lands: GCRA's TAKE and PEEK on one key, in
-- microseconds on Redis's clock (a double holds them exactly), so that the
-- backend's script path (SCRIPT LOAD, EVALSHA, NOSCRIPT) can be exercised. Any
-- other request is refused with an error that says so.
local op = ARGV[1]
if #KEYS ~= 1 or ARGV[3] ~= 'gcra' or (op ~= 'TAKE' and op ~= 'PEEK') then
  return redis.error_reply('ERR this sluice.lua decides only TAKE and PEEK of one gcra limit')
end
local limit = tonumber(ARGV[4])
local period_us = math.floor(tonumber(ARGV[5]) / 1000)
local burst = tonumber(ARGV[6])
local cost = tonumber(ARGV[7])
if burst == 0 then burst = limit end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local interval = period_us / limit
local tau = burst * interval
local tat = tonumber(redis.call('GET', KEYS[1]) or '0')
if tat < now then tat = now end
local new_tat = tat + cost * interval
local allowed = new_tat - now <= tau
local reply = {-1, 0, burst, 0, 0, 0, 0}
if allowed then
  if op == 'TAKE' and cost > 0 then
    redis.call('SET', KEYS[1], string.format('%d', math.ceil(new_tat)),
               'PX', math.max(1, math.ceil((new_tat - now) / 1000)))
  end
  reply[2] = 1
  reply[4] = math.floor((tau - (new_tat - now)) / interval)
  reply[6] = math.ceil(new_tat - now) * 1000
else
  reply[1] = 0
  reply[4] = math.max(0, math.floor((tau - (tat - now)) / interval))
  reply[5] = math.ceil(new_tat - now - tau) * 1000
  reply[6] = math.ceil(tat - now) * 1000
end
return reply
