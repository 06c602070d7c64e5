-- reset_many.lua: move many jobs of one slot (heartbeats), optionally creating missing ones.
-- KEYS: the slot's five keys (see lib.lua).
-- ARGV[1] now (ms)
-- ARGV[2] create: '-' to create nothing; otherwise the record spec of a created job, JSON
--         ('' for a plain job)
-- ARGV[3], ARGV[4], ...: pairs of id and fire time (ms)
-- Returns {reset, created, head, missing id, ...}: head is the slot's earliest fire time
-- afterwards (-1 when the slot has no scheduled job).
-- Cost: per chunk of ids one ZMSCORE, one HMGET and one variadic ZADD, whatever the count,
-- so a batch costs far less than one command per id. A running or dead job costs a few more.
local now = tonumber(ARGV[1])
local create = ARGV[2] ~= '-'
local spec_json = ARGV[2]
local has_spec = create and spec_json ~= ''
local CHUNK = 1000 -- keeps unpack() far below Lua's stack limit
local n = (#ARGV - 2) / 2
local reset, created, missing = 0, 0, {}

for base = 0, n - 1, CHUNK do
  local last = math.min(base + CHUNK, n) - 1
  local ids, ats = {}, {}
  for i = base, last do
    ids[#ids + 1] = ARGV[3 + 2 * i]
    ats[#ats + 1] = tonumber(ARGV[4 + 2 * i])
  end
  local scores = redis.call('ZMSCORE', DUE, unpack(ids))
  local recs = redis.call('HMGET', JOB, unpack(ids))
  local zadd = {}
  for i, id in ipairs(ids) do
    local at = ats[i]
    if scores[i] then
      if recs[i] then
        local rec = cjson.decode(recs[i])
        at = capped(rec, at)
        if rec.c then
          rec.u = now
          redis.call('HSET', JOB, id, cjson.encode(rec))
        end
      end
      zadd[#zadd + 1] = at
      zadd[#zadd + 1] = id
      reset = reset + 1
    elseif redis.call('ZSCORE', RUN, id) then
      local rec = decode(recs[i])
      rec.r = capped(rec, at)
      if rec.c then rec.u = now end
      save(id, rec)
      reset = reset + 1
    elseif create then
      -- A dead job is replaced by the new one, as a schedule would.
      redis.call('ZREM', DEAD, id)
      if has_spec then
        local rec = cjson.decode(spec_json)
        rec.c = now; rec.u = now
        redis.call('HSET', JOB, id, cjson.encode(rec))
      elseif recs[i] then
        redis.call('HDEL', JOB, id)
      end
      zadd[#zadd + 1] = at
      zadd[#zadd + 1] = id
      created = created + 1
    else
      missing[#missing + 1] = id
    end
  end
  if #zadd > 0 then
    redis.call('ZADD', DUE, unpack(zadd))
  end
end

local head = redis.call('ZRANGE', DUE, 0, 0, 'WITHSCORES')
local out = {reset, created, head[2] and tonumber(head[2]) or -1}
for _, id in ipairs(missing) do out[#out + 1] = id end
return out
