-- finish.lua: apply the outcome of one run.
-- KEYS: the slot's five keys (see lib.lua).
-- ARGV[1] id
-- ARGV[2] the run's token
-- ARGV[3] outcome: 'ack' | 'retry' | 'repeat' | 'bury' | 'release'
-- ARGV[4] fire time for 'retry' and 'repeat' (ms)
-- ARGV[5] error text for 'retry' and 'bury'
-- ARGV[6] now (ms)
-- ARGV[7] the topic's max attempts (for records that do not name their own)
-- Returns {result, fire_at}: result is 'done' | 'retrying' | 'repeating' | 'dead' |
--   'released' | 'rescheduled' | 'stale'; fire_at is when the job is due again (-1 if not).
-- 'stale': the job is not running under this token (its lease expired and another run took
-- it, or it was cancelled); nothing changes.
-- A reset that arrived during the run wins over the outcome: the job is scheduled again at
-- the reset's time with attempts starting again, so no reset is ever lost.
local id, token, outcome = ARGV[1], ARGV[2], ARGV[3]
local at, err, now, default_max = tonumber(ARGV[4]), ARGV[5], tonumber(ARGV[6]), tonumber(ARGV[7])

if not redis.call('ZSCORE', RUN, id) then return {'stale', -1} end
local rec = load(id)
if rec.k == nil or string.format('%d', rec.k) ~= token then return {'stale', -1} end
redis.call('ZREM', RUN, id)

if rec.r then
  local again = rec.r
  rec.a = nil; rec.e = nil
  reschedule(id, rec, again)
  save(id, rec)
  return {'rescheduled', again}
end

if outcome == 'ack' then
  redis.call('HDEL', JOB, id)
  return {'done', -1}
elseif outcome == 'repeat' then
  rec.a = nil; rec.e = nil
  rec.n = (rec.n or 0) + 1
  reschedule(id, rec, at)
  save(id, rec)
  return {'repeating', at}
elseif outcome == 'release' then
  local a = (rec.a or 1) - 1
  rec.a = a > 0 and a or nil
  reschedule(id, rec, now)
  save(id, rec)
  return {'released', now}
end

rec.e = err
if outcome == 'retry' and (rec.a or 0) < (rec.m or default_max) then
  reschedule(id, rec, at)
  save(id, rec)
  return {'retrying', at}
end
-- 'bury', or a retry with its attempts used up.
rec.k = nil
redis.call('ZADD', DEAD, now, id)
save(id, rec)
return {'dead', -1}
