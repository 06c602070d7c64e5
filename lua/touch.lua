-- touch.lua: extend the lease of a run that is still working.
-- KEYS: the slot's eight keys (see lib.lua).
-- ARGV[1] id
-- ARGV[2] the run's token
-- ARGV[3] the new lease deadline (ms)
-- Returns 1 when extended, 0 when the run is stale (another run holds the job, or it is gone).
local id, token, deadline = ARGV[1], ARGV[2], tonumber(ARGV[3])
if not redis.call('ZSCORE', RUN, id) then return 0 end
local rec = load(id)
if rec.k == nil or string.format('%d', rec.k) ~= token then return 0 end
redis.call('ZADD', RUN, 'XX', deadline, id)
return 1
