-- own.lua: take or renew a slot's owner lease. Only the owner's pumps are accepted: each
-- carries the lease's fence, a number that only grows, and pump.lua refuses any other.
-- KEYS: the slot's keys (see lib.lua); KEYS[7] is its owner hash {id, until, fence}.
-- ARGV[1] the owner asking: `name:incarnation` (a process under an instance name), or a name
-- ARGV[2] now (ms)
-- ARGV[3] lease length (ms)
-- Returns {1, fence} when the instance owns the slot until now + lease (a new owner gets the
-- next fence; an owner renewing keeps its own); {0, holder, until} when another instance
-- holds a lease that has not run out. A lease held under the same name by another
-- incarnation (the process before a restart) is taken over at once, under the next fence.
local instance, now, ttl = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local function name_of(owner) return (string.match(owner, '^[^:]*')) end
local cur = redis.call('HMGET', OWNER, 'id', 'until', 'fence')
local id, till = cur[1], tonumber(cur[2] or '0')
if id and id ~= instance and name_of(id) ~= name_of(instance) and till > now then
  return {0, id, till}
end
local fence = tonumber(cur[3] or '0')
if id ~= instance then
  fence = redis.call('HINCRBY', OWNER, 'fence', 1)
end
redis.call('HSET', OWNER, 'id', instance, 'until', now + ttl)
return {1, fence}
