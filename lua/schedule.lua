-- schedule.lua: create, replace, or move one job.
-- KEYS: the slot's eight keys (see lib.lua).
-- ARGV[1] id
-- ARGV[2] mode: 'upsert' | 'create' | 'reset'
-- ARGV[3] fire time (ms)
-- ARGV[4] now (ms)
-- ARGV[5] the new job's record spec, JSON ('' for a plain job; 'reset' reads only its `tp`,
--         the trace context a traced reset gives the job)
-- ARGV[6] the topic's slot count the caller routed with (see stale_layout in lib.lua)
-- Returns {outcome, state, fire_at, is_head, fires, type, score, record}:
--   outcome: 'created' | 'replaced' | 'exists' | 'reset' | 'missing'
--   state: the job's state afterwards ('' when it does not exist)
--   fire_at: the fire time that took effect (-1 when none); for a running job, the time it
--            fires again after its run
--   is_head: 1 when the job is scheduled and no scheduled job of the slot fires before it
--   fires, type: for a reset, how often the job had fired (repeated) since its last reset,
--            and its type ('' when default); 0 and '' otherwise
--   score, record: the job as stored afterwards, so that the caller reads nothing back
--            (Store::schedule answers it as Scheduled::job): its score in its state's set
--            (-1 when there is no job) and its record's text ('' when plain or none)
local id, mode, at, now = ARGV[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
local stale = stale_layout(tonumber(ARGV[6]))
if stale then return stale end
local function apply()
  local state = locate(id)

  if mode == 'create' and state then
    return {'exists', state, -1, 0, 0}
  end

  if mode == 'reset' then
    if state ~= 'scheduled' and state ~= 'running' then
      return {'missing', state or '', -1, 0, 0}
    end
    local raw = redis.call('HGET', JOB, id)
    local rec = decode(raw)
    -- A traced reset: the job's next fire continues the resetting request's trace.
    local tp = ARGV[5] ~= '' and decode(ARGV[5]).tp or nil
    if tp then rec.tp = tp end
    at = capped(rec, at)
    local fired = rearm(rec) or 0
    if state == 'running' then
      -- Applied after the run: the outcome reschedules the job at this time.
      rec.r = at
      if rec.c then rec.u = now end
      save(id, rec)
      return {'reset', 'running', at, 0, fired, rec.t or ''}
    end
    if rec.c then rec.u = now end
    put_due(id, rec, at)
    if raw or tp then save(id, rec) end
    return {'reset', 'scheduled', at, is_head(at) and 1 or 0, fired, rec.t or ''}
  end

  -- 'upsert', or 'create' of a job that does not exist.
  local spec = decode(ARGV[5])
  at = capped(spec, at)
  if state == 'running' then
    -- The run keeps its token and attempt; the new definition fires after it.
    local rec = load(id)
    spec.a = rec.a; spec.k = rec.k; spec.f = rec.f; spec.r = at
    spec.c = rec.c or now; spec.u = now
    save(id, spec)
    return {'replaced', 'running', at, 0, 0}
  end
  if state == 'dead' then
    redis.call('ZREM', DEAD, id)
  end
  if next(spec) ~= nil then
    local old = state == 'scheduled' and load(id) or {}
    spec.c = old.c or spec.c or now -- a spec names c when a doubling moves a job home
    spec.u = now
    redis.call('HSET', JOB, id, cjson.encode(spec))
  else
    redis.call('HDEL', JOB, id)
  end
  put_due(id, spec, at)
  return {state and 'replaced' or 'created', 'scheduled', at, is_head(at) and 1 or 0, 0}
end

local reply = apply()
local state, score = locate(id)
reply[6] = reply[6] or ''
reply[7] = score or -1
reply[8] = state and redis.call('HGET', JOB, id) or ''
return reply
