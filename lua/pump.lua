-- pump.lua: hand out a slot's due jobs, and take back runs whose lease expired.
-- KEYS: the slot's eight keys (see lib.lua).
-- ARGV[1] now (ms)
-- ARGV[2] limit: most jobs to hand out (and most expired leases to take back)
-- ARGV[3] lease length (ms): a run must report by now + this
-- ARGV[4] the topic's max attempts (for records that do not name their own)
-- ARGV[5] the owner lease's fence (see own.lua), or 0 for a pump that needs no ownership
--         (a consumer's claim, a test); a fence that is not the slot's current one is refused
--         with the error FENCED before anything changes: a former owner never pumps
-- Returns {next_at, expired, id, record, id, record, ...}:
--   next_at: the next instant the slot needs attention (earliest due job or lease deadline
--            left), -1 when none; expired: leases taken back; per job handed out, its id
--            and its run's record, which names the run's token (k), attempt (a) and fire
--            time (f).
-- A job is never handed out before its fire time: only scores <= now are taken, where now
-- is the caller's, but never later than this node's own clock (TIME): whatever the clock of
-- the process that asks, the node holding the slot decides what is due (DESIGN.md,
-- invariant 3). Tests pass instants in the past, which the node's clock leaves as they are.
local now, limit, lease = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local time = redis.call('TIME')
local node_now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
if node_now < now then now = node_now end
local TABLE_PAD, RUN_PAD = pads()
local default_max = tonumber(ARGV[4])
local fence = tonumber(ARGV[5] or '0')
-- The owner hash says whose the slot is and whether its due members are marked (lib.lua's
-- MARK): in a marked slot a bare member is a job with no record, whose record is not read.
local owner = redis.call('HMGET', OWNER, 'fence', 'marked')
if fence > 0 then
  local held = tonumber(owner[1] or '0')
  if held ~= fence then
    return redis.error_reply('FENCED the slot\'s fence is ' .. held .. ', not ' .. fence)
  end
end
mark_slot(owner[2])

-- The run set's earliest lease deadline (its padding member, at +inf, is none), or nil.
local function run_head()
  local head = redis.call('ZRANGE', RUN, '0', '0', 'WITHSCORES')
  if head[1] == nil or head[1] == RUN_PAD then return nil end
  return tonumber(head[2])
end
local lease_head = run_head()

-- Runs that did not report in time: scheduled again (due now, or at a reset that arrived
-- during the run), or dead when their attempts are used up.
local expired = {}
if lease_head and lease_head <= now then
  expired = redis.call('ZRANGEBYSCORE', RUN, '-inf', now, 'LIMIT', 0, limit)
end
for _, id in ipairs(expired) do
  redis.call('ZREM', RUN, id)
  local rec = load(id)
  local attempts, max = rec.a or 0, rec.m or default_max
  if rec.r then
    local at = rec.r
    rec.a = nil; rec.e = nil
    reschedule(id, rec, at)
  else
    rec.e = 'lease expired: the run did not report within the visibility timeout (attempt '
      .. attempts .. ' of ' .. max .. ')'
    if attempts >= max then
      rec.k = nil
      redis.call('ZADD', DEAD, now, id)
    else
      reschedule(id, rec, now)
    end
  end
  save(id, rec)
end

if #expired > 0 then lease_head = run_head() end

local out = {-1, #expired}
-- The due set's first two members tell most pumps all they need: none due (the first's
-- time is the next), or one (the second's is). Only a pump with more due reads them all,
-- and the new head after they go.
local due, due_next, read_next = {}, nil, false
local first_two = redis.call('ZRANGE', DUE, '0', '1', 'WITHSCORES')
if first_two[2] == nil or tonumber(first_two[2]) > now or limit < 1 then
  due_next = first_two[2]
elseif first_two[4] == nil or tonumber(first_two[4]) > now or limit == 1 then
  due = {first_two[1], first_two[2]}
  due_next = first_two[4]
else
  due = redis.call('ZRANGEBYSCORE', DUE, '-inf', string.format('%d', now), 'WITHSCORES', 'LIMIT', '0', ARGV[2])
  read_next = true
end
local count = #due / 2
if count > 0 then
  local ids, run, marked = {}, {}, false
  -- One string for every lease deadline: Lua formats a number each time it passes one on.
  local deadline = string.format('%d', now + lease)
  for i = 1, count do
    -- lib.lua's due_id, inline: this loop runs once per job of a burst.
    local id = due[2 * i - 1]
    if string.byte(id, -1) == 0 then
      id = string.sub(id, 1, -2)
      marked = true
    end
    ids[i] = id
    run[2 * i - 1] = deadline
    run[2 * i] = id
  end
  -- The jobs taken are the set's first `count` by rank (every score up to now comes before
  -- the rest, ties in member order as ZRANGEBYSCORE gave them): removed by rank, without
  -- passing their ids back to Redis.
  redis.call('ZREMRANGEBYRANK', DUE, '0', string.format('%d', count - 1))
  -- The run set is kept a skiplist for the reason the job hash is kept a hash table (below):
  -- small, it would be a listpack that each ZADD, ZMSCORE and ZREM scans. Its padding
  -- member, at +inf, is never a lease that runs out and never the next deadline.
  run[#run + 1] = '+inf'
  run[#run + 1] = RUN_PAD
  redis.call('ZADD', RUN, unpack(run))
  local first = redis.call('INCRBY', SEQ, string.format('%d', count)) - count
  -- Only marked members have a record to read (the slot is marked: above).
  local recs = marked and redis.call('HMGET', JOB, unpack(ids)) or {}
  local put = {}
  for i, id in ipairs(ids) do
    local raw
    if recs[i] then
      local rec = decode(recs[i])
      rec.a = (rec.a or 0) + 1
      rec.k = first + i
      rec.f = tonumber(due[2 * i])
      raw = cjson.encode(rec)
    else
      -- A plain job has no record: its run's record is written without a JSON round trip.
      raw = '{"a":1,"k":' .. string.format('%d', first + i) .. ',"f":' .. due[2 * i] .. '}'
    end
    put[2 * i - 1] = id
    put[2 * i] = raw
    out[#out + 1] = id
    out[#out + 1] = raw
  end
  -- The slot's job hash now holds a record per run in flight. Small, Redis keeps a hash
  -- as a listpack, where each HSET, HMGET and HDEL of a field scans the whole list, which a
  -- burst's full pump batches in flight make costly (BENCHMARKS.md).
  -- A field no job can have (ids are never empty) with a value longer than
  -- hash-max-listpack-value (64 bytes by default) makes it a hash table, for as long as
  -- the key lives; that field is never removed, so it lives for good.
  put[#put + 1] = ''
  put[#put + 1] = TABLE_PAD
  redis.call('HSET', JOB, unpack(put))
end

if read_next then due_next = redis.call('ZRANGE', DUE, '0', '0', 'WITHSCORES')[2] end
-- The runs just leased end at now + lease.
if count > 0 and (lease_head == nil or now + lease < lease_head) then lease_head = now + lease end
local next_at = -1
if due_next then next_at = tonumber(due_next) end
if lease_head and (next_at < 0 or lease_head < next_at) then next_at = lease_head end
out[1] = next_at
return out
