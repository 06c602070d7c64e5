-- requeue.lua: schedule a dead job again, due now, with attempts starting again.
-- KEYS: the slot's eight keys (see lib.lua).
-- ARGV[1] id
-- ARGV[2] now (ms)
-- Returns 1 when requeued, 0 when there is no such dead job.
local id, now = ARGV[1], tonumber(ARGV[2])
if redis.call('ZREM', DEAD, id) == 0 then return 0 end
local rec = load(id)
rec.a = nil; rec.e = nil
if rec.c then rec.u = now end
reschedule(id, rec, now)
save(id, rec)
return 1
