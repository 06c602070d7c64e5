-- list.lua: a page of one slot's scheduled or running jobs in score order (fire time, or
-- lease deadline), after a cursor: what Store::list merges across a topic's slots.
-- KEYS: the slot's eight keys (see lib.lua).
-- ARGV[1] which set: 'scheduled' | 'running'
-- ARGV[2] from, ARGV[3] to: the scores to list (ms, both inclusive)
-- ARGV[4] the cursor's score ('' for the first page), ARGV[5] its id
-- ARGV[6] limit
-- Returns {id, score, record, id, score, record, ...}, the record '' for a plain job.
-- A sorted set orders members of one score by their bytes, as Rust orders ids (a marked
-- member of the due set sorts as its id: lib.lua's MARK): the page
-- starts at the first (score, id) after the cursor, found by rank: the members below the
-- cursor's score, then a binary search among those at its score. The run set's padding
-- member is at +inf, past any `to`.
local key = ARGV[1] == 'running' and RUN or DUE
local from, to, limit = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[6])

-- Whether `a` sorts after `b`, byte by byte (Lua's < follows the locale).
local function bytes_after(a, b)
  local n = math.min(#a, #b)
  for i = 1, n do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then return x > y end
  end
  return #a > #b
end

local start = redis.call('ZCOUNT', key, '-inf', '(' .. from)
if ARGV[4] ~= '' and tonumber(ARGV[4]) >= from then
  local s, id = tonumber(ARGV[4]), ARGV[5]
  local lo = redis.call('ZCOUNT', key, '-inf', '(' .. s)
  local hi = lo + redis.call('ZCOUNT', key, s, s)
  while lo < hi do
    local mid = math.floor((lo + hi) / 2)
    if bytes_after(due_id(redis.call('ZRANGE', key, mid, mid)[1]), id) then
      hi = mid
    else
      lo = mid + 1
    end
  end
  start = lo
end

local page = redis.call('ZRANGE', key, start, start + limit - 1, 'WITHSCORES')
local out = {}
for i = 1, #page, 2 do
  local id, score = due_id(page[i]), tonumber(page[i + 1])
  if score > to then break end
  out[#out + 1] = id
  out[#out + 1] = page[i + 1]
  out[#out + 1] = redis.call('HGET', JOB, id) or ''
end
return out
