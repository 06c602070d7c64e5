-- lib.lua: the helpers every script runs with (not a script of its own). The scripts
-- implement the slot state machine of src/store/state_machine.rs (its table is in
-- docs/architecture.md); each script's call is in src/store/redis/scripts/NAME.rs.
-- Every script takes the same KEYS, the eight keys of one slot:
--   KEYS[1] due  (zset: id -> fire time)     KEYS[2] run (zset: id -> lease deadline)
--   KEYS[3] dead (zset: id -> time of death) KEYS[4] job (hash: id -> record JSON)
--   KEYS[5] seq  (counter of run tokens)     KEYS[6] events (stream: the slot's events)
--   KEYS[7] owner (hash: id, until, fence: the slot's owner lease, see own.lua; events: the
--           events the stream holds)
--   KEYS[8] sizes (list: the stream's entries, oldest first, as 'count id')
-- The job hash and the run set each hold one member that is no job, set by pump.lua to keep
-- them a hash table and a skiplist: the empty id in the hash, and in the run set a member
-- longer than any id at score +inf (no lookup by id meets either; readers of the whole run
-- set skip it).
-- A record holds only fields that differ from the topic's defaults (src/store/record.rs);
-- an empty record is not stored at all. A running or dead job always has a record (its
-- attempts, token or error), which reset_many.lua relies on. A record names a run token (k)
-- exactly while its job is in the run set: pump.lua writes both, and every script that
-- takes a job out of the run set drops k or the record in the same step. settle.lua relies
-- on it (tests/redis_engine.rs checks it after a mixed workload). A scheduled job is in the
-- due set under its bare id exactly when it has no record (MARK, below; the same test
-- checks it): reset_many's plain path relies on it.
-- The helpers run once per library (src/store/redis/scripts/library.rs): each script, as a
-- function or as an EVAL script, starts by binding them to its call's keys.
local DUE, RUN, DEAD, JOB, SEQ, EVENTS, OWNER, SIZES
local function bind(keys)
  DUE, RUN, DEAD, JOB, SEQ, EVENTS = keys[1], keys[2], keys[3], keys[4], keys[5], keys[6]
  OWNER, SIZES = keys[7], keys[8]
end

local function load(id)
  local raw = redis.call('HGET', JOB, id)
  if raw then return cjson.decode(raw) end
  return {}
end

local function decode(raw)
  if raw and raw ~= '' then return cjson.decode(raw) end
  return {}
end

local function save(id, rec)
  if next(rec) == nil then
    redis.call('HDEL', JOB, id)
  else
    redis.call('HSET', JOB, id, cjson.encode(rec))
  end
end

-- The due set names a scheduled job that has a record by its id followed by MARK, and a
-- plain one (no record) by its id alone. MARK (the NUL byte) is in no id (src/validate.rs)
-- and below every byte one may hold, so members still sort as their ids do (list.lua's
-- cursor). A ZADD XX of bare ids therefore moves plain jobs and nothing else: the
-- heartbeat path of src/store/redis/jobs.rs sends one without a script, and a job that a
-- reset must read (a debounce cap, a fire count to re-arm, an updated time) is never among
-- what it moves. src/store/keys.rs names the same byte (DUE_MARK).
local MARK = '\0'
local function due_member(id, rec)
  if next(rec) ~= nil then return id .. MARK end
  return id
end

-- The id of a due set's member.
local function due_id(member)
  if string.byte(member, -1) == 0 then return string.sub(member, 1, -2) end
  return member
end

-- A slot written before due members were marked has jobs with a record under their bare
-- ids: they are marked here, once, and the owner hash says so ('marked'). reset_many.lua
-- runs it before its plain path is trusted, pump.lua before it reads no record for a bare
-- member; the caller has read the owner hash's 'marked' (`was`).
local function mark_slot(was)
  if was then return end
  for _, id in ipairs(redis.call('HKEYS', JOB)) do
    local s = id ~= '' and redis.call('ZSCORE', DUE, id)
    if s then
      redis.call('ZREM', DUE, id)
      redis.call('ZADD', DUE, s, id .. MARK)
    end
  end
  redis.call('HSET', OWNER, 'marked', 1)
end

-- The padding members (see the header): the job hash's field with the empty id gets a value
-- over hash-max-listpack-value (JOB_PAD_LEN dots), the run set's member at +inf is
-- RUN_PAD_LEN dots, longer than any id may be (MAX_ID_LEN) and than
-- zset-max-listpack-value: the constants of src/store/keys.rs, whose test checks these
-- lengths. Built on first use, once per library as a function (once per call as a script).
local TABLE_PAD, RUN_PAD
local function pads()
  if not RUN_PAD then
    local DOTS = '....................................................................................................'
    TABLE_PAD = DOTS .. '............................'
    RUN_PAD = DOTS .. DOTS .. DOTS .. DOTS .. DOTS .. DOTS
  end
  return TABLE_PAD, RUN_PAD
end

-- Job `id`'s fire time if it is scheduled (as the due set's text), and its member there.
local function due_score(id)
  local s = redis.call('ZSCORE', DUE, id)
  if s then return s, id end
  s = redis.call('ZSCORE', DUE, id .. MARK)
  if s then return s, id .. MARK end
  return nil, nil
end

-- Scheduled job `id` at `at`, under the member its record `rec` (as it is saved) calls for;
-- the other member goes, for a job whose record was made or emptied.
local function put_due(id, rec, at)
  local member = due_member(id, rec)
  redis.call('ZREM', DUE, member == id and id .. MARK or id)
  redis.call('ZADD', DUE, at, member)
end

-- Where the job is: 'scheduled', 'running', 'dead' or nil, with the score there.
local function locate(id)
  local s = due_score(id)
  if s then return 'scheduled', tonumber(s) end
  s = redis.call('ZSCORE', RUN, id)
  if s then return 'running', tonumber(s) end
  s = redis.call('ZSCORE', DEAD, id)
  if s then return 'dead', tonumber(s) end
  return nil, nil
end

-- The debounce cap: a fire time never goes past the record's max fire time.
local function capped(rec, at)
  if rec.x and at > rec.x then return rec.x end
  return at
end

-- Back to scheduled at `at` from the run or dead set: the run's fields go, and the record
-- is otherwise as it will be saved.
local function reschedule(id, rec, at)
  rec.k = nil; rec.f = nil; rec.r = nil
  redis.call('ZADD', DUE, at, due_member(id, rec))
end

-- A reset re-arms a job that had fired (repeated): its fire count goes, and the caller is
-- told, so the job type can react (device_offline reports the device recovered).
local function rearm(rec)
  local n = rec.n
  rec.n = nil
  return n
end

-- Whether no scheduled job of the slot fires before `at` (ties count as the head).
local function is_head(at)
  local head = redis.call('ZRANGE', DUE, 0, 0, 'WITHSCORES')
  return head[2] ~= nil and tonumber(head[2]) >= at
end

-- A write routed with fewer slots than the topic has had since a doubling (the writer's
-- settings are stale): refused before anything changes, as the error STALE_LAYOUT, so the
-- writer reads the settings again and routes anew. A doubling marks each old slot's owner
-- hash with the new count ('slots').
local function stale_layout(slots)
  local layout = tonumber(redis.call('HGET', OWNER, 'slots') or '0')
  if layout > slots then
    return redis.error_reply('STALE_LAYOUT the topic has ' .. layout .. ' slots, not ' .. slots)
  end
  return nil
end

-- Appends events (their JSON texts, in order) to the slot's stream: one entry holds up to
-- EVENTS_PER_ENTRY of them, one field 'e' each (an event's id is its entry's and its place
-- in it: src/store/event_id.rs), so a settle of a hundred runs is one XADD, not a hundred.
-- The owner hash's field 'events' counts the events the stream holds, and the sizes list
-- each entry's; past cap and a 64th, the oldest entries go while the stream keeps at least
-- cap events without them (the sizes list says which, without reading the events). The
-- entries just added never go. Returns nothing. (Counts go to Redis as text: a Lua number
-- passed to redis.call is formatted with %.14g, the slow float path of printf.)
local EVENTS_PER_ENTRY = 1000
local trim_events
local function append_events(evs, cap)
  if #evs == 0 then return end
  local first, sizes, oldest_new = 1, {}, nil
  while first <= #evs do
    local last = math.min(first + EVENTS_PER_ENTRY - 1, #evs)
    local fields = {}
    for j = first, last do
      fields[#fields + 1] = 'e'
      fields[#fields + 1] = evs[j]
    end
    local id = redis.call('XADD', EVENTS, '*', unpack(fields))
    oldest_new = oldest_new or id
    sizes[#sizes + 1] = string.format('%d', last - first + 1) .. ' ' .. id
    first = last + 1
  end
  redis.call('RPUSH', SIZES, unpack(sizes))
  local held = redis.call('HINCRBY', OWNER, 'events', string.format('%d', #evs))
  trim_events(held, #evs, #sizes, oldest_new, cap)
end

-- append_events of one event (a run settled alone), without its tables.
local function append_event(ev, cap)
  local id = redis.call('XADD', EVENTS, '*', 'e', ev)
  redis.call('RPUSH', SIZES, '1 ' .. id)
  trim_events(redis.call('HINCRBY', OWNER, 'events', '1'), 1, 1, id, cap)
end

-- After an append of `added` events in `new_entries` entries, the first `oldest_new`, which
-- left the stream holding `held`: the count starts, and the oldest entries go past the cap.
trim_events = function(held, added, new_entries, oldest_new, cap)
  if held == added then
    -- The count starts here (trimming never takes a stream below its cap): a stream
    -- appended to before the sizes list (one event an entry, uncounted) joins it as one
    -- block of its older entries, so trimming reaches them too.
    local old = redis.call('XLEN', EVENTS) - new_entries
    if old > 0 then
      local newest_old = redis.call('XREVRANGE', EVENTS, '(' .. oldest_new, '-', 'COUNT', 1)[1][1]
      redis.call('LPUSH', SIZES, old .. ' ' .. newest_old)
      held = redis.call('HINCRBY', OWNER, 'events', old)
    end
  end
  if held <= cap + math.ceil(cap / 64) then return end
  local excess, removed, entries, cut = held - cap, 0, 0, nil
  while true do
    local oldest = redis.call('LRANGE', SIZES, entries, entries + 63)
    local stop = #oldest == 0
    for _, size in ipairs(oldest) do
      local n, id = string.match(size, '^(%d+) (.+)$')
      n = tonumber(n)
      if removed + n > excess then stop = true; break end
      removed, entries, cut = removed + n, entries + 1, id
    end
    if stop then break end
  end
  if cut then
    local ms, seq = string.match(cut, '^(%d+)-(%d+)$')
    redis.call('XTRIM', EVENTS, 'MINID', ms .. '-' .. string.format('%d', tonumber(seq) + 1))
    redis.call('LTRIM', SIZES, entries, -1)
    redis.call('HINCRBY', OWNER, 'events', -removed)
  end
end
