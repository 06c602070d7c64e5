-- reset_many.lua: move many jobs of one slot (heartbeats), optionally creating missing ones.
-- KEYS: the slot's eight keys (see lib.lua).
-- ARGV[1] now (ms)
-- ARGV[2] create: '-' to create nothing; otherwise the record spec of a created job, JSON
--         ('' for a plain job)
-- ARGV[3], ARGV[4], ...: pairs of id and fire time (ms)
-- ARGV[#ARGV] (last): the topic's slot count the caller routed with (see stale_layout)
-- Returns {reset, created, n_missing, missing id..., then triples of a re-armed job:
-- id, times it had fired (repeated) since its last reset, type ('' when default)}.
--
-- Cost. A running or dead job always has a record, so an id without one is either a plain
-- scheduled job (in the due set under its bare id: lib.lua's MARK) or no job at all. Those
-- ids (the heartbeat case) take one HMGET and one variadic ZADD per chunk, their fire times
-- passed through as the caller's strings:
-- ZADD XX CH moves every existing one, and when it reports fewer changes than ids, a ZMSCORE
-- finds which were missing (or were reset to the time they already had). Ids with a record
-- take a few commands each. Both paths mean what SlotState::reset_many
-- (src/store/memory/slot.rs) does one job at a time; the differential test holds them to it.
local now = tonumber(ARGV[1])
local create = ARGV[2] ~= '-'
local spec_json = ARGV[2]
local plain_create = create and spec_json == ''
local CHUNK = 1000 -- keeps unpack() far below Lua's stack limit
local n = (#ARGV - 3) / 2
local stale = stale_layout(tonumber(ARGV[#ARGV]))
if stale then return stale end

-- A slot written before due members were marked (lib.lua's MARK) is marked first: the
-- engine takes the plain path (a ZADD XX without this script) only in slots where this
-- script has run (src/store/redis/jobs.rs).
mark_slot(redis.call('HGET', OWNER, 'marked'))
local reset, created, missing, n_missing = 0, 0, {}, 0
local rearmed = {}

local function create_job(id, at)
  if spec_json ~= '' then
    local rec = cjson.decode(spec_json)
    rec.c = now; rec.u = now
    redis.call('HSET', JOB, id, cjson.encode(rec))
    redis.call('ZADD', DUE, at, id .. MARK)
  else
    redis.call('ZADD', DUE, at, id)
  end
  created = created + 1
end

-- An id with a record: scheduled (capped by its max fire time), running (applied after the
-- run), dead (replaced when creating), or gone.
local function reset_recorded(id, raw, at_text)
  local rec = cjson.decode(raw)
  local at = capped(rec, tonumber(at_text))
  local live = due_score(id)
  if live or redis.call('ZSCORE', RUN, id) then
    local fired = rearm(rec)
    if fired then
      rearmed[#rearmed + 1] = id
      rearmed[#rearmed + 1] = fired
      rearmed[#rearmed + 1] = rec.t or ''
    end
    if rec.c then rec.u = now end
    if live then
      put_due(id, rec, at)
    else
      rec.r = at -- running: applied after the run
    end
    save(id, rec)
    reset = reset + 1
  elseif create then
    redis.call('ZREM', DEAD, id)
    redis.call('HDEL', JOB, id)
    create_job(id, tonumber(at_text))
  else
    n_missing = n_missing + 1
    missing[n_missing] = id
  end
end

-- An id whose record was used earlier in this call: read again, so that a job named twice
-- is reset twice in order, as two calls would (a record read before the first would bring
-- back what the first changed).
local seen = {}
local function reset_again(id, at_text)
  local raw = redis.call('HGET', JOB, id)
  if raw then
    reset_recorded(id, raw, at_text)
    return
  end
  local at = tonumber(at_text) -- no record: a plain scheduled job, or none
  if redis.call('ZSCORE', DUE, id) then
    redis.call('ZADD', DUE, at, id)
    reset = reset + 1
  elseif create then
    create_job(id, at)
  else
    n_missing = n_missing + 1
    missing[n_missing] = id
  end
end

for base = 0, n - 1, CHUNK do
  local last = math.min(base + CHUNK, n) - 1
  local ids, k = {}, 0
  for i = base, last do
    k = k + 1
    ids[k] = ARGV[3 + 2 * i]
  end
  local recs = redis.call('HMGET', JOB, unpack(ids))
  local plain, plain_ids, m = {}, {}, 0
  for i = 1, k do
    local at_text = ARGV[4 + 2 * (base + i - 1)]
    if recs[i] and seen[ids[i]] then
      reset_again(ids[i], at_text)
    elseif recs[i] then
      seen[ids[i]] = true
      reset_recorded(ids[i], recs[i], at_text)
    else
      m = m + 1
      plain[2 * m - 1] = at_text
      plain[2 * m] = ids[i]
      plain_ids[m] = ids[i]
    end
  end
  if m > 0 then
    if plain_create then
      local added = redis.call('ZADD', DUE, unpack(plain))
      created = created + added
      reset = reset + m - added
    else
      local changed = redis.call('ZADD', DUE, 'XX', 'CH', unpack(plain))
      if changed == m then
        reset = reset + m
      else
        local scores = redis.call('ZMSCORE', DUE, unpack(plain_ids))
        for j = 1, m do
          if scores[j] then
            reset = reset + 1
          elseif create then
            create_job(plain_ids[j], tonumber(plain[2 * j - 1]))
          else
            n_missing = n_missing + 1
            missing[n_missing] = plain_ids[j]
          end
        end
      end
    end
  end
end

local out = {reset, created, n_missing}
for i = 1, n_missing do out[3 + i] = missing[i] end
for i = 1, #rearmed do out[3 + n_missing + i] = rearmed[i] end
return out
