-- flow.lua: one flow key's counters (src/store/flow.rs, whose arithmetic this follows), on
-- the server's clock (TIME), so instances whose clocks differ count alike.
-- KEYS[1] holders (zset: member run `id:token`, score until when it holds room)
-- KEYS[2] the period's fires (zset: member run, score when it fired)
-- KEYS[3] waiters (hash: field waiter, value `n:oldest:at`)
--   (The slot keys of lib.lua are absent: this script touches no job.)
-- ARGV[1] 'take' | 'release' | 'state'
-- ARGV[2] rate (0: none), ARGV[3] period ms, ARGV[4] guard ms, ARGV[5] parallelism (0: none)
-- take:    ARGV[6] hold ms, ARGV[7] waiter, ARGV[8] runs it holds waiting, ARGV[9] the
--          oldest's fire time, ARGV[10..] runs asking, oldest first.
--          Returns {granted, ms until the rate has room (0: all granted, or parallelism full)}.
-- release: ARGV[6..] runs whose room ends. Returns {0, 0}.
-- state:   Returns {in flight, fires in the period, waiting, oldest wait (-1: none)}.
local STALE = 60000
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local op = ARGV[1]
local rate, period, guard, par =
  tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
if op == 'release' then
  for i = 6, #ARGV do
    redis.call('ZREM', KEYS[1], ARGV[i])
  end
  return {0, 0}
end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now - period - guard)
if op == 'state' then
  local waiting, oldest = 0, -1
  local all = redis.call('HGETALL', KEYS[3])
  for i = 1, #all, 2 do
    local n, o, at = string.match(all[i + 1], '^(%d+):(%-?%d+):(%d+)$')
    if n and tonumber(at) > now - period - STALE then
      waiting = waiting + tonumber(n)
      if oldest < 0 or tonumber(o) < oldest then oldest = tonumber(o) end
    else
      redis.call('HDEL', KEYS[3], all[i])
    end
  end
  return {redis.call('ZCARD', KEYS[1]), redis.call('ZCARD', KEYS[2]), waiting, oldest}
end
local hold, waiter, waiting, oldest_wait =
  tonumber(ARGV[6]), ARGV[7], tonumber(ARGV[8]), ARGV[9]
local asked = #ARGV - 9
local room = asked
if par > 0 then
  room = math.min(room, math.max(0, par - redis.call('ZCARD', KEYS[1])))
end
local rate_room = -1
if rate > 0 then
  rate_room = math.max(0, rate - redis.call('ZCARD', KEYS[2]))
  room = math.min(room, rate_room)
end
for i = 10, 9 + room do
  if par > 0 then redis.call('ZADD', KEYS[1], now + hold, ARGV[i]) end
  if rate > 0 then redis.call('ZADD', KEYS[2], now, ARGV[i]) end
end
local wait = 0
if room < asked and rate_room >= 0 and rate_room <= room then
  local first = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
  if first[2] then
    wait = math.max(1, tonumber(first[2]) + period + guard - now)
  end
end
if waiting - room > 0 then
  redis.call('HSET', KEYS[3], waiter, (waiting - room) .. ':' .. oldest_wait .. ':' .. now)
else
  redis.call('HDEL', KEYS[3], waiter)
end
-- Counters untouched past their reach are empty anyway: let them go.
local ttl = math.max(period + guard, hold) + STALE
for i = 1, 3 do
  redis.call('PEXPIRE', KEYS[i], ttl)
end
return {room, wait}
