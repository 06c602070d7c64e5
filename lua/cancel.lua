-- cancel.lua: remove a job, whatever its state.
-- KEYS: the slot's eight keys (see lib.lua).
-- ARGV[1] id
-- Returns the state the job was in ('scheduled' | 'running' | 'dead'), or '' if there was
-- none. A run of a cancelled job finds its token gone and its outcome is reported stale.
local id = ARGV[1]
local state = locate(id)
if not state then return '' end
redis.call('ZREM', DUE, id, id .. MARK)
redis.call('ZREM', RUN, id)
redis.call('ZREM', DEAD, id)
redis.call('HDEL', JOB, id)
return state
