-- get.lua: read one job in one consistent step.
-- KEYS: the slot's six keys (see lib.lua).
-- ARGV[1] id
-- Returns {state, score, record}: state '' when there is no such job; score is the fire
-- time (scheduled), lease deadline (running) or time of death (dead); record '' when none.
local id = ARGV[1]
local state, score = locate(id)
if not state then return {'', -1, ''} end
return {state, score, redis.call('HGET', JOB, id) or ''}
