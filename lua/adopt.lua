-- adopt.lua: the slot's runs that a pump handed out but whose answer its owner never got
-- (the connection dropped between the script and its reply), so that the owner runs them
-- now rather than when their leases run out.
-- KEYS: the slot's eight keys (see lib.lua).
-- ARGV[1] the owner lease's fence (see own.lua): any other is refused with FENCED
-- ARGV[2] the highest run token the owner has seen handed out: runs with a higher token
--         were handed to it by the pumps it did not hear back from (tokens only grow, and
--         only the owner pumps a handler topic's slot)
-- Returns {id, record, lease deadline, ...} for each such run; changes nothing.
local fence, above = tonumber(ARGV[1]), tonumber(ARGV[2])
local held = tonumber(redis.call('HGET', OWNER, 'fence') or '0')
if held ~= fence then
  return redis.error_reply('FENCED the slot\'s fence is ' .. held .. ', not ' .. fence)
end
local runs = redis.call('ZRANGE', RUN, 0, -1, 'WITHSCORES')
local out = {}
for i = 1, #runs, 2 do
  local id = runs[i]
  local raw = redis.call('HGET', JOB, id)
  if raw then
    local rec = cjson.decode(raw)
    if rec.k and rec.k > above then
      out[#out + 1] = id
      out[#out + 1] = raw
      out[#out + 1] = runs[i + 1]
    end
  end
end
return out
