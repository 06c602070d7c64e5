-- events_page.lua: one slot's share of a page of the topic's event stream.
-- KEYS: the slot's eight keys (see lib.lua); only KEYS[6], the slot's stream, is read.
-- An entry holds the events of one settle (one field 'e' each, in order); an event is
-- named by its entry's id and its place in the entry (src/store/event_id.rs).
-- ARGV[1] the first entry to read ('-' for the oldest, or an entry id, inclusive)
-- ARGV[2] events to skip at the start of that entry, when it is there (the reader's cursor
--         is inside it)
-- ARGV[3] most events to return
-- Returns {now_ms, id1, place1, event1, id2, place2, event2, ...}. `now_ms` is this node's
-- clock: every entry appended later gets an id at or after it, so the reader may merge
-- events older than the smallest `now_ms` of all slots without missing one still to come.
local start, skip, limit = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local t = redis.call('TIME')
local out = {tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)}
local n = 0
-- One entry more than events asked for: the first may be skipped whole.
for _, entry in ipairs(redis.call('XRANGE', EVENTS, start, '+', 'COUNT', limit + 1)) do
  local id, fields = entry[1], entry[2]
  local from = 0
  if id == start then from = skip end
  local place = 0
  for j = 1, #fields, 2 do
    if fields[j] == 'e' then
      if place >= from then
        if n == limit then return out end
        out[#out + 1] = id
        out[#out + 1] = place
        out[#out + 1] = fields[j + 1]
        n = n + 1
      end
      place = place + 1
    end
  end
end
return out
