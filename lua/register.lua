-- register.lua: an instance's heartbeat in the registry of instances sharing the store.
-- KEYS[1] toc:instances (hash: instance -> time its registration runs out, ms)
-- ARGV[1] the instance
-- ARGV[2] now (ms)
-- ARGV[3] how long the registration lasts (ms)
-- Returns the live instances (this one included), after dropping those run out.
local now = tonumber(ARGV[2])
redis.call('HSET', KEYS[1], ARGV[1], now + tonumber(ARGV[3]))
local all = redis.call('HGETALL', KEYS[1])
local live = {}
for i = 1, #all, 2 do
  if tonumber(all[i + 1]) > now then
    live[#live + 1] = all[i]
  else
    redis.call('HDEL', KEYS[1], all[i])
  end
end
return live
