-- append.lua: append events that no settle carries (a re-armed job's, an event posted
-- through the API) to one slot's stream, as settle.lua appends its own (lib.lua's
-- append_events: one entry, trimmed to about the cap).
-- KEYS: the slot's eight keys (see lib.lua).
-- ARGV[1] the slot stream's cap in events
-- ARGV[2], ...: the events' JSON, in order
-- Returns 1.
local evs = {}
for i = 2, #ARGV do evs[i - 1] = ARGV[i] end
append_events(evs, tonumber(ARGV[1]))
return 1
