-- settle.lua: apply the outcomes of a batch of runs of one slot and append their events to
-- the slot's event stream, in one atomic step: no run is acknowledged without its events.
-- KEYS: the slot's seven keys (see lib.lua).
-- ARGV[1] now (ms)
-- ARGV[2] the topic's max attempts (for records that do not name their own)
-- ARGV[3] the slot stream's cap (XADD MAXLEN ~)
-- ARGV[4] the topic's name, ARGV[5] its default job type (for heads built here)
-- Then per run, in order: id, token, outcome ('ack' | 'retry' | 'repeat' | 'bury' |
--   'release'), fire time for 'retry' and 'repeat' (ms), error text, the event head (an
--   event's JSON without its 'event' and 'data' fields and closing brace; '' to build it
--   here from the run's record, with now as its fired_at: a consumer's ack names only the
--   run), n, and the n events its handler emitted (JSON).
-- Returns one result per run, in order: 'done' | 'retrying' | 'repeating' | 'dead' |
--   'released' | 'rescheduled' | 'stale'.
-- 'stale': the job is not running under this token (its lease expired and another run took
-- it, or it was cancelled); nothing changes and no event is appended.
-- A reset that arrived during a run wins over its outcome: the job is scheduled again at the
-- reset's time with attempts starting again, so no reset is ever lost.
-- The runtime's event for each result is the one src/events.rs `outcome_event` describes.
-- Order: every read, then every XADD, then every job change. Redis does not roll back a
-- script that fails half way, so a failing XADD (a wrong type at the key, out of memory)
-- must stop the script before any job changed: the runs stay running and come back after
-- their lease.
local now, default_max, cap = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3]
local topic, default_type = ARGV[4], ARGV[5]

local function num(n) return string.format('%d', n) end
-- The record pump.lua writes for a run of a plain job: attempts, token and fire time.
local PLAIN_RUN = '^{"a":(%d+),"k":(%d+),"f":(%d+)}$'

-- The runtime's event for a result: name and data JSON, or nil.
local RESCHEDULED = {ack = 'job.done', retry = 'job.retry', ['repeat'] = 'job.repeat', bury = 'job.dead'}
local function outcome_event(run)
  local r = run.result
  if r == 'done' then return 'job.done', 'null' end
  if r == 'retrying' then
    return 'job.retry', '{"error":' .. cjson.encode(run.err) .. ',"retry_at":' .. num(run.at) .. '}'
  end
  if r == 'repeating' then return 'job.repeat', '{"repeat_at":' .. num(run.at) .. '}' end
  if r == 'dead' then return 'job.dead', '{"error":' .. cjson.encode(run.err) .. '}' end
  if r == 'rescheduled' then
    local name = RESCHEDULED[run.outcome]
    if not name then return nil end
    if run.err ~= '' then
      return name, '{"error":' .. cjson.encode(run.err) .. ',"rescheduled":true}'
    end
    return name, '{"rescheduled":true}'
  end
  return nil
end

-- Reads: each run's record and result, in one ZMSCORE and one HMGET for the batch. A batch
-- may hold two runs of one job (an expired lease and its successor, or one run twice): the
-- first that carries the record's token settles the job, which is then no longer running,
-- so every later one is stale, as if the runs were settled one at a time.
local runs, ids = {}, {}
local NONE = {} -- the emitted events of a run that has none (most): one table for them all
local i = 6
while i <= #ARGV do
  local n = tonumber(ARGV[i + 6])
  local run = {id = ARGV[i], token = ARGV[i + 1], outcome = ARGV[i + 2], at = tonumber(ARGV[i + 3]),
    err = ARGV[i + 4], head = ARGV[i + 5], emitted = NONE}
  if n > 0 then
    run.emitted = {}
    for j = 1, n do run.emitted[j] = ARGV[i + 6 + j] end
  end
  i = i + 7 + n
  runs[#runs + 1] = run
  ids[#ids + 1] = run.id
end
if #runs == 0 then return {} end
local leases = redis.call('ZMSCORE', RUN, unpack(ids))
local raws = redis.call('HMGET', JOB, unpack(ids))
local settled = {}
for k, run in ipairs(runs) do
  run.result = 'stale'
  local raw = raws[k]
  if leases[k] and raw and not settled[run.id] then
    -- A plain job's run, acked (a burst, a pull consumer): its record is the one pump.lua
    -- wrote, read as text without a JSON decode.
    local a, token, f = nil, nil, nil
    if run.outcome == 'ack' then a, token, f = string.match(raw, PLAIN_RUN) end
    if a then
      if token == run.token then
        run.result = 'done'; run.a = a; run.f = f
        settled[run.id] = true
      end
    else
      local rec = decode(raw)
      if rec.k ~= nil and string.format('%d', rec.k) == run.token then
        run.rec = rec
        local o = run.outcome
        if rec.r then run.result = 'rescheduled'
        elseif o == 'ack' then run.result = 'done'
        elseif o == 'repeat' then run.result = 'repeating'
        elseif o == 'release' then run.result = 'released'
        elseif o == 'retry' and (rec.a or 0) < (rec.m or default_max) then run.result = 'retrying'
        else run.result = 'dead' end
        settled[run.id] = true
      end
    end
  end
end

-- The head of a run's events, as src/events.rs `Event::head_json` writes it, from its record.
-- Encoded once per call: the topic, and each job type met.
local topic_json = '{"topic":' .. cjson.encode(topic) .. ',"job_id":'
local type_json = {}
-- An id as a JSON string; most need no escape, and skip cjson.
local function id_json(id)
  if string.find(id, '[%c"\\]') then return cjson.encode(id) end
  return '"' .. id .. '"'
end
local function head_of(run)
  local rec, t, a, f = run.rec, default_type, run.a, run.f
  if rec then t, a, f = rec.t or default_type, num(rec.a or 0), num(rec.f or 0) end
  local tj = type_json[t]
  if not tj then
    tj = ',"type":' .. cjson.encode(t) .. ',"fire_at":'
    type_json[t] = tj
  end
  return topic_json .. id_json(run.id) .. tj .. f .. ',"fired_at":' .. ARGV[1]
    .. ',"attempt":' .. a
end

-- Events, the last one's XADD trimming the stream to its cap (no XTRIM call of its own:
-- most settles carry one or two runs, and each call of a script costs).
local evs = {}
for _, run in ipairs(runs) do
  if run.result ~= 'stale' then
    for _, e in ipairs(run.emitted) do evs[#evs + 1] = e end
    local name, data = outcome_event(run)
    if name then
      if run.head == '' then run.head = head_of(run) end
      evs[#evs + 1] = run.head .. ',"event":"' .. name .. '","data":' .. data .. '}'
    end
  end
end
for j = 1, #evs - 1 do redis.call('XADD', EVENTS, '*', 'e', evs[j]) end
if #evs > 0 then redis.call('XADD', EVENTS, 'MAXLEN', '~', cap, '*', 'e', evs[#evs]) end

-- Job changes, gathered into one call per command.
local results, settled, due, dead, put, gone = {}, {}, {}, {}, {}, {}
local function keep(id, rec)
  if next(rec) == nil then
    gone[#gone + 1] = id
  else
    put[#put + 1] = id
    put[#put + 1] = cjson.encode(rec)
  end
end
local function schedule_at(id, rec, at)
  rec.k = nil; rec.f = nil; rec.r = nil
  due[#due + 1] = at
  due[#due + 1] = id
  keep(id, rec)
end
for k, run in ipairs(runs) do
  local id, rec, r = run.id, run.rec, run.result
  results[k] = r
  if r ~= 'stale' then settled[#settled + 1] = id end
  if r == 'rescheduled' then
    local again = rec.r
    rec.a = nil; rec.e = nil
    schedule_at(id, rec, again)
  elseif r == 'done' then
    gone[#gone + 1] = id
  elseif r == 'repeating' then
    rec.a = nil; rec.e = nil
    rec.n = (rec.n or 0) + 1
    schedule_at(id, rec, run.at)
  elseif r == 'released' then
    local a = (rec.a or 1) - 1
    rec.a = a > 0 and a or nil
    schedule_at(id, rec, ARGV[1])
  elseif r == 'retrying' then
    rec.e = run.err
    schedule_at(id, rec, run.at)
  elseif r == 'dead' then
    rec.e = run.err
    rec.k = nil
    dead[#dead + 1] = ARGV[1]
    dead[#dead + 1] = id
    keep(id, rec)
  end
end
if #settled > 0 then redis.call('ZREM', RUN, unpack(settled)) end
if #due > 0 then redis.call('ZADD', DUE, unpack(due)) end
if #dead > 0 then redis.call('ZADD', DEAD, unpack(dead)) end
if #put > 0 then redis.call('HSET', JOB, unpack(put)) end
if #gone > 0 then redis.call('HDEL', JOB, unpack(gone)) end
return results
