-- dead_page.lua: one slot's dead letters after a cursor, oldest first.
-- KEYS: the slot's eight keys (see lib.lua).
-- ARGV[1] cursor time of death (ms), or '-inf' for the first page
-- ARGV[2] cursor id ('' for the first page): entries at the cursor's time sort by id
-- ARGV[3] limit
-- Returns {id, time of death, record, ...} for up to `limit` entries after the cursor.
local after_at, after_id, limit = ARGV[1], ARGV[2], tonumber(ARGV[3])
local at_num = tonumber(after_at)
local out, offset, taken = {}, 0, 0
while taken < limit do
  local page = redis.call('ZRANGEBYSCORE', DEAD, after_at, '+inf', 'WITHSCORES', 'LIMIT', offset, 100)
  if #page == 0 then break end
  for i = 1, #page, 2 do
    local id, score = page[i], tonumber(page[i + 1])
    if at_num == nil or score > at_num or id > after_id then
      out[#out + 1] = id
      out[#out + 1] = score
      out[#out + 1] = redis.call('HGET', JOB, id) or ''
      taken = taken + 1
      if taken >= limit then break end
    end
  end
  offset = offset + #page / 2
end
return out
