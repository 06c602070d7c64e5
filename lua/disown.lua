-- disown.lua: give up a slot's owner lease (a handoff), so the next owner need not wait for
-- it to run out. The fence stays: the next owner's is higher.
-- KEYS: the slot's keys (see lib.lua); KEYS[7] is its owner hash.
-- ARGV[1] the instance giving it up
-- Returns 1 when it held the lease, 0 otherwise (nothing changes).
if redis.call('HGET', OWNER, 'id') ~= ARGV[1] then return 0 end
redis.call('HDEL', OWNER, 'id', 'until')
return 1
