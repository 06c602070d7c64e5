-- dead_delete.lua: drop a dead letter.
-- KEYS: the slot's eight keys (see lib.lua).
-- ARGV[1] id
-- Returns 1 when deleted, 0 when there is no such dead job (a live job is left alone).
local id = ARGV[1]
if redis.call('ZREM', DEAD, id) == 0 then return 0 end
redis.call('HDEL', JOB, id)
return 1
