-- import.lua: write jobs as an export holds them (`toc import`), each unless the slot holds a
-- job of its id already (that one is left as it is), so an import run again changes nothing.
-- KEYS: the slot's eight keys (see lib.lua).
-- ARGV[1] the topic's slot count the caller routed with (see stale_layout in lib.lua)
-- ARGV[2..] four per job: id; 'scheduled' or 'dead'; its fire time or time of death (ms);
--           its record JSON ('' for a plain job: a dead job always has one)
-- Returns how many jobs it wrote.
local stale = stale_layout(tonumber(ARGV[1]))
if stale then return stale end
local written = 0
for i = 2, #ARGV, 4 do
  local id, state, score, raw = ARGV[i], ARGV[i + 1], tonumber(ARGV[i + 2]), ARGV[i + 3]
  if not locate(id) then
    if raw ~= '' then redis.call('HSET', JOB, id, raw) end
    if state == 'dead' then
      redis.call('ZADD', DEAD, score, id)
    else
      put_due(id, decode(raw), score)
    end
    written = written + 1
  end
end
return written
