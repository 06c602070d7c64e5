-- settle.lua: apply the outcomes of a batch of runs of one slot and append their events to
-- the slot's event stream, in one atomic step: no run is acknowledged without its events.
-- KEYS: the slot's eight keys (see lib.lua).
-- ARGV[1] now (ms)
-- ARGV[2] the topic's max attempts (for records that do not name their own)
-- ARGV[3] the slot stream's cap in events (about; see the XADD below)
-- ARGV[4] the topic's name, ARGV[5] its default job type (for heads built here)
-- ARGV[6] which events its runs keep (TopicConfig::events): 'all', 'changes' (all but
--         job.done) or 'none'; the caller leaves out its handlers' events the topic does not
--         keep, and this script the runtime's own
-- Then per run, in order, one of two forms.
-- The short form, for a run the runtime ends with 'done' and no events of its handler's
--   (most of a burst): id, token, the run's record as pump.lua handed it out, and its
--   job.done event whole (the event head, then ',"event":"job.done","data":null}'), or
--   NO_EVENT ('{}') when the topic keeps no job.done; four arguments, not eight, and no
--   event to build. Its fourth argument, a JSON object, is what tells it from the long
--   form's, an outcome word.
-- The long form: id, token, the run's record as pump.lua handed it out ('' when
--   the caller does not hold it: a consumer's ack names only the run), outcome ('done' |
--   'retry' | 'repeat' | 'dead' | 'release' | 'end': RunOutcome::as_str; 'end' is a
--   recurring job's last fire: done, or dead when it carries an error), fire time for 'retry',
--   'repeat' and 'release' (ms; now for a shutdown's release),
--   error text, the event head (an event's JSON without its 'event' and 'data' fields and
--   closing brace; '' to build it here from the run's record, with now as its fired_at),
--   n, and the n events its handler emitted (JSON).
-- Returns one result per run, in order: 'done' | 'retrying' | 'repeating' | 'dead' |
--   'released' | 'rescheduled' | 'stale' | 'recur'.
-- 'stale': the job is not running under this token (its lease expired and another run took
-- it, or it was cancelled); nothing changes and no event is appended.
-- A reset that arrived during a run wins over its outcome: the job is scheduled again at the
-- reset's time with attempts starting again, so no reset is ever lost.
-- The runtime's event for each result is the one src/events.rs `outcome_event` describes.
-- Order: every read, then every XADD, then every job change. Redis does not roll back a
-- script that fails half way, so a failing XADD (a wrong type at the key, out of memory)
-- must stop the script before any job changed: the runs stay running and come back after
-- their lease.
-- A run is read from ARGV where it starts, with no table of its own: most batches are
-- bursts of plain acks, where Lua's tables cost more than the commands.
local now, default_max, cap = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local topic, default_type, kept = ARGV[4], ARGV[5], ARGV[6]
-- Whether the topic keeps the runtime's event `name`.
local function keeps(name)
  return kept == 'all' or (kept == 'changes' and name ~= 'job.done')
end
-- A run's arguments, from where it starts (its id).
local TOKEN, HANDED, OUTCOME, AT, ERR, HEAD, N = 1, 2, 3, 4, 5, 6, 7

local function num(n) return string.format('%d', n) end
-- The record pump.lua writes for a run of a plain job: attempts, token and fire time.
local PLAIN_RUN = '^{"a":(%d+),"k":(%d+),"f":(%d+)}$'
-- The end of a short run's event, after its head.
local DONE_TAIL = ',"event":"job.done","data":null}'
-- A short run's event when the topic keeps no job.done: nothing is appended for it.
local NO_EVENT = '{}'

-- One run in the short form that settles as it was handed out (its record as handed, and
-- no schedule): the run of a slot firing a job at a time, settled alone. The fast path
-- below, without its tables.
if #ARGV == 10 and string.byte(ARGV[10]) == 123 then
  local id = ARGV[7]
  local raw = redis.call('HGET', JOB, id)
  if raw and raw == ARGV[9] and not string.find(raw, '"s":', 1, true) then
    if ARGV[10] ~= NO_EVENT then append_event(ARGV[10], cap) end
    redis.call('ZREM', RUN, id)
    redis.call('HDEL', JOB, id)
    return {'done'}
  end
end

-- Where each run starts, and whether it is in the short form (its fourth argument '{...').
local starts, ids, short, n_short = {}, {}, {}, 0
local i = 7
while i <= #ARGV do
  local k = #ids + 1
  starts[k] = i
  ids[k] = ARGV[i]
  if string.byte(ARGV[i + 3]) == 123 then
    short[k] = true
    n_short = n_short + 1
    i = i + 4
  else
    i = i + N + 1 + tonumber(ARGV[i + N])
  end
end
local m = #ids
if m == 0 then return {} end
-- Reads: each run's record, in one HMGET for the batch (see below).
local raws = redis.call('HMGET', JOB, unpack(ids))

-- The common batch: every run in the short form, each settling as it was handed out (its
-- record as handed, no reset since, no schedule, one run per job). It needs none of what
-- the general path below builds (a dozen closures and tables a call), which a run of the
-- runtime settled alone pays in full.
local fast = n_short == m
if fast then
  local seen = {}
  for k = 1, m do
    local raw, id = raws[k], ids[k]
    if not raw or raw ~= ARGV[starts[k] + 2] or seen[id] or string.find(raw, '"s":', 1, true) then
      fast = false
      break
    end
    seen[id] = true
  end
end
if fast then
  local evs, result = {}, {}
  for k = 1, m do
    local ev = ARGV[starts[k] + 3]
    if ev ~= NO_EVENT then evs[#evs + 1] = ev end
    result[k] = 'done'
  end
  append_events(evs, cap)
  redis.call('ZREM', RUN, unpack(ids))
  redis.call('HDEL', JOB, unpack(ids))
  return result
end
-- What a run's arguments say, whichever its form: a short run is a 'done' with no error
-- and no events of its handler's, and its head is its event without DONE_TAIL.
local function outcome_of(k)
  if short[k] then return 'done' end
  return ARGV[starts[k] + OUTCOME]
end
local function error_of(k)
  if short[k] then return '' end
  return ARGV[starts[k] + ERR]
end
local function emitted_of(k)
  if short[k] then return 0 end
  return tonumber(ARGV[starts[k] + N])
end
local function head_arg(k)
  if short[k] then
    local event = ARGV[starts[k] + 3]
    if event == NO_EVENT then return '' end
    return string.sub(event, 1, #event - #DONE_TAIL)
  end
  return ARGV[starts[k] + HEAD]
end

-- Each run's record (raws, read above). A record names a token (k) exactly
-- while its job is in the run set (see lib.lua), so a record that names the run's token
-- tells that the job is running under this run. A batch may hold two runs of one job (an
-- expired lease and its successor, or one run twice): the first that carries the record's
-- token settles the job, which is then no longer running, so every later one is stale, as
-- if the runs were settled one at a time.
-- Per run: its result, and what its event head needs when built here: the decoded record,
-- or a plain run's attempt and fire time as text.
local result, recs, attempt, fired = {}, {}, {}, {}
local taken = {}
for k = 1, m do
  local b, raw, id = starts[k], raws[k], ids[k]
  local r = 'stale'
  if raw and not taken[id] then
    local outcome = outcome_of(k)
    if outcome == 'done' and raw == ARGV[b + HANDED] and not string.find(raw, '"s":', 1, true) then
      -- The record as this run was handed it (one compare: Lua interns its strings): the
      -- job is running under this run, and no reset or replace came since. The same
      -- answer as the token check below and SlotState::finish's (src/store/memory/slot.rs);
      -- the text is the run's HandedRecord (src/model.rs).
      r = 'done'
    else
      local a, token, f = nil, nil, nil
      if outcome == 'done' then a, token, f = string.match(raw, PLAIN_RUN) end
      if a then
        -- A plain job's run, acked by a consumer: read as text, without a JSON decode (the
        -- record pump.lua writes for a plain job, Record with attempts, token, run_fire_at).
        if token == ARGV[b + TOKEN] then
          r = 'done'; attempt[k] = a; fired[k] = f
        end
      else
        local rec = decode(raw)
        if rec.k ~= nil and num(rec.k) == ARGV[b + TOKEN] then
          recs[k] = rec
          if rec.r then r = 'rescheduled'
          elseif outcome == 'done' then r = 'done'
          elseif outcome == 'repeat' then r = 'repeating'
          elseif outcome == 'release' then r = 'released'
          elseif outcome == 'end' then r = ARGV[b + ERR] == '' and 'done' or 'dead'
          elseif outcome == 'retry' and (rec.a or 0) < (rec.m or default_max) then r = 'retrying'
          else r = 'dead' end
          -- A recurring job's run that ended (done, or out of attempts) changes nothing
          -- here: the caller settles it again as a repeat at its schedule's next instant
          -- (src/recurrence.rs), which only Rust can compute, or as its series' end.
          if rec.s and outcome ~= 'end' and (r == 'done' or r == 'dead') then r = 'recur' end
        end
      end
    end
    if r ~= 'stale' and r ~= 'recur' then taken[id] = true end
  end
  result[k] = r
end

-- The runtime's event for run k's result: name and data JSON, or nil.
local RESCHEDULED = {done = 'job.done', retry = 'job.retry', ['repeat'] = 'job.repeat', dead = 'job.dead'}
local function outcome_event(k)
  local r, b = result[k], starts[k]
  if r == 'done' then return 'job.done', 'null' end
  local err = error_of(k)
  if r == 'retrying' then
    return 'job.retry', '{"error":' .. cjson.encode(err) .. ',"retry_at":' .. ARGV[b + AT] .. '}'
  end
  if r == 'repeating' then
    if err ~= '' then
      return 'job.repeat', '{"repeat_at":' .. ARGV[b + AT] .. ',"error":' .. cjson.encode(err) .. '}'
    end
    return 'job.repeat', '{"repeat_at":' .. ARGV[b + AT] .. '}'
  end
  if r == 'dead' then return 'job.dead', '{"error":' .. cjson.encode(err) .. '}' end
  if r == 'rescheduled' then
    local name = RESCHEDULED[outcome_of(k)]
    if outcome_of(k) == 'end' then name = err ~= '' and 'job.dead' or 'job.done' end
    if not name then return nil end
    if err ~= '' then
      return name, '{"error":' .. cjson.encode(err) .. ',"rescheduled":true}'
    end
    return name, '{"rescheduled":true}'
  end
  return nil
end

-- The head of run k's events, as src/events.rs `Event::head_json` writes it, from its
-- record. Encoded once per call: the topic, and each job type met.
local topic_json = nil
local type_json = {}
-- An id as a JSON string; most need no escape, and skip cjson.
local function id_json(id)
  if string.find(id, '[%c"\\]') then return cjson.encode(id) end
  return '"' .. id .. '"'
end
local function head_of(k)
  local t, a, f = default_type, attempt[k], fired[k]
  if not a then
    local rec = recs[k] or decode(raws[k])
    t, a, f = rec.t or default_type, num(rec.a or 0), num(rec.f or 0)
  end
  local tj = type_json[t]
  if not tj then
    tj = ',"type":' .. cjson.encode(t) .. ',"fire_at":'
    type_json[t] = tj
  end
  topic_json = topic_json or '{"topic":' .. cjson.encode(topic) .. ',"job_id":'
  return topic_json .. id_json(ids[k]) .. tj .. f .. ',"fired_at":' .. ARGV[1]
    .. ',"attempt":' .. a
end

-- Events: the batch's, appended as one stream entry and trimmed to about cap (lib.lua's
-- append_events; one XADD per batch costs Redis a quarter of a burst's settle time less
-- than one per event).
local evs = {}
local function changes(k) return result[k] ~= 'stale' and result[k] ~= 'recur' end
for k = 1, m do
  if short[k] and result[k] == 'done' then
    -- A short run that settled as it was sent: its event is written whole.
    local ev = ARGV[starts[k] + 3]
    if ev ~= NO_EVENT then evs[#evs + 1] = ev end
  elseif changes(k) then
    local b = starts[k]
    for j = 1, emitted_of(k) do evs[#evs + 1] = ARGV[b + N + j] end
    local name, data = outcome_event(k)
    if name and keeps(name) then
      local head = head_arg(k)
      if head == '' then head = head_of(k) end
      evs[#evs + 1] = head .. ',"event":"' .. name .. '","data":' .. data .. '}'
    end
  end
end
append_events(evs, cap)

-- Job changes, gathered into one call per command.
local settled, due, dead, put, gone = {}, {}, {}, {}, {}
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
  due[#due + 1] = due_member(id, rec)
  keep(id, rec)
end
for k = 1, m do
  local id, rec, r = ids[k], recs[k], result[k]
  if changes(k) then settled[#settled + 1] = id end
  if r == 'done' then
    gone[#gone + 1] = id
  elseif r == 'rescheduled' then
    local again = rec.r
    rec.a = nil; rec.e = nil
    schedule_at(id, rec, again)
  elseif r == 'repeating' then
    local err = ARGV[starts[k] + ERR]
    rec.a = nil; rec.e = err ~= '' and err or nil
    rec.n = (rec.n or 0) + 1
    schedule_at(id, rec, ARGV[starts[k] + AT])
  elseif r == 'released' then
    -- Due again at its time: now (a shutdown, a pause), or later (a run past its flow
    -- key's share of the slot's waiting room).
    local a = (rec.a or 1) - 1
    rec.a = a > 0 and a or nil
    schedule_at(id, rec, ARGV[starts[k] + AT])
  elseif r == 'retrying' then
    rec.e = ARGV[starts[k] + ERR]
    schedule_at(id, rec, ARGV[starts[k] + AT])
  elseif r == 'dead' then
    rec.e = ARGV[starts[k] + ERR]
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
return result
