-- rate.lua: a topic's fire bucket (its max_fires_per_s), shared by every instance, on the
-- server's clock (TIME), so instances whose clocks differ draw from one bucket alike. The
-- arithmetic is src/store/rate.rs's Bucket (take, give_back), in thousandths of a fire.
-- KEYS[1] the topic's bucket (hash: m thousandths of a fire held, at its last refill in ms).
--   (The slot keys of lib.lua are absent: this script touches no slot.)
-- ARGV[1] 'take' | 'give', ARGV[2] the rate (fires/s), ARGV[3] fires wanted or given back
-- Returns {granted, ms until what was wanted is there (0 when all was granted)}.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local rate, n = tonumber(ARGV[2]), tonumber(ARGV[3])
local cap = math.max(1, math.ceil(rate / 20)) * 1000
local held = redis.call('HMGET', KEYS[1], 'm', 'at')
local m, at = tonumber(held[1]) or cap, tonumber(held[2]) or now
if now > at then
  m = math.min(cap, m + (now - at) * rate)
  at = now
end
local granted, wait = 0, 0
if ARGV[1] == 'give' then
  m = math.min(cap, m + n * 1000)
else
  granted = math.min(n, math.floor(m / 1000))
  m = m - granted * 1000
  if granted < n then
    wait = math.ceil(math.max(1, math.min(n * 1000, cap) - m) / rate)
  end
end
redis.call('HSET', KEYS[1], 'm', m, 'at', at)
-- A bucket untouched for a minute is full again anyway: let it go.
redis.call('PEXPIRE', KEYS[1], 60000)
return {granted, wait}
