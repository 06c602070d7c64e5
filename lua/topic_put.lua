-- topic_put.lua: compare and set of one topic's settings, so that a change decided on
-- settings read earlier never overwrites a change made since (a doubling above all: writing
-- the old slot count back would send lookups to the wrong slots).
-- KEYS[1] toc:topics (the helpers' slot keys are unused here)
-- ARGV[1] the topic's name
-- ARGV[2] the settings the change was decided on, JSON ('' when the topic did not exist)
-- ARGV[3] the new settings, JSON
-- Returns 1 when set; 0 when the stored settings are no longer ARGV[2] (nothing changed).
local stored = redis.call('HGET', KEYS[1], ARGV[1]) or ''
if stored ~= ARGV[2] then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
return 1
