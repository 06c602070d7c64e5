-- events_page.lua: one slot's share of a page of the topic's event stream.
-- KEYS: the slot's seven keys (see lib.lua); only KEYS[6], the slot's stream, is read.
-- ARGV[1] the XRANGE start ('-', an id, or '(' and an id for after it)
-- ARGV[2] most entries to return
-- Returns {now_ms, id1, event1, id2, event2, ...}. `now_ms` is this node's clock: every
-- entry appended later gets an id at or after it, so the reader may merge entries older
-- than the smallest `now_ms` of all slots without missing one that is still to come.
local t = redis.call('TIME')
local out = {tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)}
for _, entry in ipairs(redis.call('XRANGE', EVENTS, ARGV[1], '+', 'COUNT', ARGV[2])) do
  local fields = entry[2]
  for j = 1, #fields, 2 do
    if fields[j] == 'e' then
      out[#out + 1] = entry[1]
      out[#out + 1] = fields[j + 1]
    end
  end
end
return out
