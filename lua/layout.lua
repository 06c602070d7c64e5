-- layout.lua: marks an old slot with its topic's slot count after a doubling, so that a
-- write routed with a smaller count is refused (stale_layout in lib.lua). Marks only grow.
-- KEYS: the slot's eight keys (see lib.lua); KEYS[7], its owner hash, keeps the mark.
-- ARGV[1] the topic's slot count now
-- Returns the mark afterwards.
local n = tonumber(ARGV[1])
local cur = tonumber(redis.call('HGET', OWNER, 'slots') or '0')
if n > cur then
  redis.call('HSET', OWNER, 'slots', n)
  return n
end
return cur
