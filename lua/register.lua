-- register.lua: an instance's heartbeat in the registry of instances sharing the store.
-- KEYS[1] toc:instances (hash: instance -> time its registration runs out, ms)
-- KEYS[2] {toc:instances}:types (hash: instance -> the job types it runs, comma-separated)
-- ARGV[1] the instance
-- ARGV[2] now (ms)
-- ARGV[3] how long the registration lasts (ms)
-- ARGV[4] the job types the instance runs, comma-separated
-- Returns the live instances (this one included), after dropping those run out, each
-- followed by its types ('' for an instance that announced none).
local now = tonumber(ARGV[2])
redis.call('HSET', KEYS[1], ARGV[1], now + tonumber(ARGV[3]))
redis.call('HSET', KEYS[2], ARGV[1], ARGV[4] or '')
local all = redis.call('HGETALL', KEYS[1])
local live = {}
for i = 1, #all, 2 do
  if tonumber(all[i + 1]) > now then
    live[#live + 1] = all[i]
    live[#live + 1] = redis.call('HGET', KEYS[2], all[i]) or ''
  else
    redis.call('HDEL', KEYS[1], all[i])
    redis.call('HDEL', KEYS[2], all[i])
  end
end
return live
