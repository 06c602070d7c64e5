-- pump.lua: hand out a slot's due jobs, and take back runs whose lease expired.
-- KEYS: the slot's eight keys (see lib.lua).
-- ARGV[1] now (ms)
-- ARGV[2] limit: most jobs to hand out (and most expired leases to take back)
-- ARGV[3] lease length (ms): a run must report by now + this
-- ARGV[4] the topic's max attempts (for records that do not name their own)
-- ARGV[5] the owner lease's fence (see own.lua), or 0 for a pump that needs no ownership
--         (a consumer's claim, a test); a fence that is not the slot's current one is refused
--         with the error FENCED before anything changes: a former owner never pumps
-- ARGV[6] lead (ms, optional, 0 when absent): jobs due within this much after now are handed
--         out too, for the caller to hold until their fire time (the slot actor's
--         runtime.fire_lead_ms, the pump's round trip paid before the fire, plus its
--         runtime.batch_window_ms, several fires in one pump)
-- ARGV[7] (optional) the flow keys whose runs are set aside, as JSON: {"keys": {key: at},
--         "url": true when the topic keys its jobs by URL}. A due job whose flow key
--         (src/flow.rs's job_key: its record's own fk, or its type's key tk, read by the
--         type's handler when the job was written, `url` saying which comes first) is one of
--         `keys` is not leased: it is due again at its key's instant, its attempt not
--         counted, as a run the slot actor sends back (RunOutcome::Defer). So a key whose
--         share of the slot's waiting room is full costs the slot a lookup a run, not a
--         lease and a settle, and its backlog never stands before other keys' jobs. At most
--         ASIDE_MAX a pump; a job with an expiry or a schedule is leased as before (the
--         actor judges its misfire first), and so is one written before records kept tk
--         (the actor sends it back).
-- Returns {next_at, expired, id, record, id, record, ...}:
--   next_at: the next instant to pump (the earliest due job's fire time less the lead, or
--            the earliest lease deadline left), -1 when none; expired: leases taken back;
--            per job handed out, its id and its run's record, which names the run's token
--            (k), attempt (a) and fire time (f).
--   With ARGV[7], {next_at, expired, {key, count, ...}, id, record, ...}: how many of each
--   key's runs were set aside.
-- Only scores <= now + lead are taken, where now is the caller's, but never later than this
-- node's own clock (TIME): whatever the clock of the process that asks, the node holding
-- the slot decides what is due (docs/design.md, invariant 3), and a job handed out ahead carries
-- its fire time, which the caller's clock (the node's TIME, sampled) waits for. Tests pass
-- instants in the past, which the node's clock leaves as they are.
local now, limit, lease = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local time = redis.call('TIME')
local node_now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
if node_now < now then now = node_now end
local lead = ARGV[6] and ARGV[6] ~= '0' and tonumber(ARGV[6]) or 0
local upto = now + lead
local TABLE_PAD, RUN_PAD = pads()
-- The owner hash says whose the slot is and whether its due members are marked (lib.lua's
-- MARK): in a marked slot a bare member is a job with no record, whose record is not read.
-- Its 'padded' says the run set and the job hash hold their padding members (below).
local owner = redis.call('HMGET', OWNER, 'fence', 'marked', 'padded')
-- The fence as text first (the same text is the same number): a number is read from text
-- by strtod, which costs a pump a few thousand instructions each time.
local fence_arg = ARGV[5] or '0'
if fence_arg ~= '0' and owner[1] ~= fence_arg then
  local fence, held = tonumber(fence_arg), tonumber(owner[1] or '0')
  if held ~= fence then
    return redis.error_reply('FENCED the slot\'s fence is ' .. held .. ', not ' .. fence)
  end
end
-- A slot with no job hash has no record to mark, and is left as it is: a pump of a new
-- topic's empty slots writes nothing (tests/http.rs compares the store around a request).
if not owner[2] and redis.call('EXISTS', JOB) == 1 then mark_slot(owner[2]) end

-- The run set's earliest lease deadline, or nil: read by score below +inf, where its padding
-- member is (never a lease that runs out, and never read: it is long).
local function run_head()
  return tonumber(redis.call('ZRANGE', RUN, '-inf', '(+inf', 'BYSCORE', 'LIMIT', '0', '1', 'WITHSCORES')[2])
end
local lease_head = run_head()

-- Runs that did not report in time: scheduled again (due now, or at a reset that arrived
-- during the run), or dead when their attempts are used up.
local expired = {}
if lease_head and lease_head <= now then
  expired = redis.call('ZRANGEBYSCORE', RUN, '-inf', now, 'LIMIT', 0, limit)
end
local default_max = #expired > 0 and tonumber(ARGV[4])
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
local aside = ARGV[7] and ARGV[7] ~= '' and cjson.decode(ARGV[7]) or nil
-- The due set's first two members tell most pumps all they need: none due (the first's
-- time is the next), or one (the second's is). Only a pump with more due reads them all,
-- and the new head after they go.
local due, due_next, read_next = {}, nil, false
local first_two = not aside and redis.call('ZRANGE', DUE, '0', '1', 'WITHSCORES')
if aside then
  read_next = true -- set aside below, or nothing when the limit is 0
elseif first_two[2] == nil or tonumber(first_two[2]) > upto or limit < 1 then
  due_next = first_two[2]
elseif first_two[4] == nil or tonumber(first_two[4]) > upto or limit == 1 then
  due = {first_two[1], first_two[2]}
  due_next = first_two[4]
else
  due = redis.call('ZRANGEBYSCORE', DUE, '-inf', string.format('%d', upto), 'WITHSCORES', 'LIMIT', '0', ARGV[2])
  read_next = true
end
-- Setting aside: the due members are read past the limit, a full key's are moved to their
-- key's instant, and the others (up to the limit) are leased below, already taken out.
local removed, set_aside = false, nil
if aside and limit >= 1 then
  local ASIDE_MAX = 2048
  -- The flow key a record's job waits on, when the actor may not need to judge it first.
  local function aside_key(raw)
    if not raw then return nil end
    local rec = cjson.decode(raw)
    if rec.xp or rec.s then return nil end
    local own = rec.fk
    if own and not aside.url then return own end
    return rec.tk or own
  end
  local scan = redis.call('ZRANGEBYSCORE', DUE, '-inf', string.format('%d', upto), 'WITHSCORES',
    'LIMIT', '0', string.format('%d', limit + ASIDE_MAX))
  local marked, at_of = {}, {}
  for i = 1, #scan / 2 do
    local m = scan[2 * i - 1]
    if string.byte(m, -1) == 0 then
      marked[#marked + 1] = string.sub(m, 1, -2)
      at_of[i] = #marked
    end
  end
  local recs = #marked > 0 and redis.call('HMGET', JOB, unpack(marked)) or {}
  local kept, moved, counts, taken = {}, {}, {}, 0
  for i = 1, #scan / 2 do
    local key = at_of[i] and aside_key(recs[at_of[i]] or false)
    local at = key and aside.keys[key]
    if at then
      moved[#moved + 1] = string.format('%d', at)
      moved[#moved + 1] = scan[2 * i - 1]
      counts[key] = (counts[key] or 0) + 1
    else
      kept[#kept + 1] = scan[2 * i - 1]
      kept[#kept + 1] = scan[2 * i]
    end
    taken = i
    if #kept / 2 >= limit or #moved / 2 >= ASIDE_MAX then break end
  end
  if taken > 0 then
    redis.call('ZREMRANGEBYRANK', DUE, '0', string.format('%d', taken - 1))
  end
  if #moved > 0 then redis.call('ZADD', DUE, unpack(moved)) end
  set_aside = {}
  for key, n in pairs(counts) do
    set_aside[#set_aside + 1] = key
    set_aside[#set_aside + 1] = n
  end
  due, removed, read_next = kept, true, true
end
local count = #due / 2
-- A run's record: the job's own (`raw`, marked members only; false when it has none) with
-- the run's attempt (one more), token and fire time; a plain job's without a JSON round trip.
local function run_record(raw, token, at)
  if raw then
    local rec = decode(raw)
    rec.a = (rec.a or 0) + 1
    rec.k = token
    rec.f = tonumber(at)
    return cjson.encode(rec)
  end
  return '{"a":1,"k":' .. string.format('%d', token) .. ',"f":' .. at .. '}'
end
-- The slot's job hash holds a record per run in flight. Small, Redis keeps a hash as a
-- listpack, where each HSET, HMGET and HDEL of a field scans the whole list, which a
-- burst's full pump batches in flight make costly (BENCHMARKS.md). A field no job can have
-- (ids are never empty) with a value longer than hash-max-listpack-value (64 bytes by
-- default) makes it a hash table, for as long as the key lives. The run set is kept a
-- skiplist for the same reason: its padding member, at +inf, is never a lease that runs
-- out and never the next deadline. No script removes either, so both live for good once
-- added, and the owner hash says so ('padded': a topic's deletion takes the slot's keys
-- together); they are added with the first runs.
local padded = owner[3]
if count > 0 and not padded then
  redis.call('HSET', OWNER, 'padded', '1')
end
-- One string for every lease deadline: Lua formats a number each time it passes one on.
local deadline = count > 0 and string.format('%d', now + lease)
if count == 1 then
  -- One job due (a slot firing a job at a time): the loop below, without its tables.
  local id, raw = due[1], false
  if string.byte(id, -1) == 0 then
    id = string.sub(id, 1, -2)
    raw = redis.call('HGET', JOB, id)
  end
  if not removed then redis.call('ZREMRANGEBYRANK', DUE, '0', '0') end
  if padded then
    redis.call('ZADD', RUN, deadline, id)
  else
    redis.call('ZADD', RUN, deadline, id, '+inf', RUN_PAD)
  end
  local record = run_record(raw, redis.call('INCRBY', SEQ, '1'), due[2])
  if padded then
    redis.call('HSET', JOB, id, record)
  else
    redis.call('HSET', JOB, id, record, '', TABLE_PAD)
  end
  out[3], out[4] = id, record
elseif count > 1 then
  local ids, run, marked = {}, {}, false
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
  -- The jobs taken are the set's first `count` by rank (every score up to now + lead comes before
  -- the rest, ties in member order as ZRANGEBYSCORE gave them): removed by rank, without
  -- passing their ids back to Redis.
  if not removed then redis.call('ZREMRANGEBYRANK', DUE, '0', string.format('%d', count - 1)) end
  if not padded then
    run[#run + 1] = '+inf'
    run[#run + 1] = RUN_PAD
  end
  redis.call('ZADD', RUN, unpack(run))
  local first = redis.call('INCRBY', SEQ, string.format('%d', count)) - count
  -- Only marked members have a record to read (the slot is marked: above).
  local recs = marked and redis.call('HMGET', JOB, unpack(ids)) or {}
  local put = {}
  for i, id in ipairs(ids) do
    local raw = run_record(recs[i] or false, first + i, due[2 * i])
    put[2 * i - 1] = id
    put[2 * i] = raw
    out[#out + 1] = id
    out[#out + 1] = raw
  end
  if not padded then
    put[#put + 1] = ''
    put[#put + 1] = TABLE_PAD
  end
  redis.call('HSET', JOB, unpack(put))
end
if read_next then due_next = redis.call('ZRANGE', DUE, '0', '0', 'WITHSCORES')[2] end
-- The runs just leased end at now + lease.
if count > 0 and (lease_head == nil or now + lease < lease_head) then lease_head = now + lease end
local next_at = -1
if due_next then next_at = tonumber(due_next) - lead end
if lease_head and (next_at < 0 or lease_head < next_at) then next_at = lease_head end
out[1] = next_at
if set_aside then table.insert(out, 3, set_aside) end
return out
