-- get.lua: read jobs of one slot in one consistent step.
-- KEYS: the slot's eight keys (see lib.lua).
-- ARGV: the ids.
-- Returns {state, score, record} per id, in order: state '' when there is no such job;
-- score is the fire time (scheduled), lease deadline (running) or time of death (dead);
-- record '' when none. One ZMSCORE per set (two for the due set, a job with a record is
-- there under its marked member: lib.lua) and one HMGET, whatever the count.
local marked = {}
for i = 1, #ARGV do marked[i] = ARGV[i] .. MARK end
local due = redis.call('ZMSCORE', DUE, unpack(ARGV))
local due_marked = redis.call('ZMSCORE', DUE, unpack(marked))
local run = redis.call('ZMSCORE', RUN, unpack(ARGV))
local dead = redis.call('ZMSCORE', DEAD, unpack(ARGV))
local recs = redis.call('HMGET', JOB, unpack(ARGV))
local out = {}
for i = 1, #ARGV do
  local state, score = '', -1
  if due[i] or due_marked[i] then state, score = 'scheduled', tonumber(due[i] or due_marked[i])
  elseif run[i] then state, score = 'running', tonumber(run[i])
  elseif dead[i] then state, score = 'dead', tonumber(dead[i]) end
  out[#out + 1] = state
  out[#out + 1] = score
  out[#out + 1] = (state ~= '' and recs[i]) or ''
end
return out
