-- Create one object. KEYS: rev, obj, idx, ev. ARGV: key, head, tail, history_len, channel,
-- notify_channel ("" = none), tenant.
-- Stored value: "<rv>:<offset>:<json>", offset = byte length of head (where the rv starts).
if redis.call('HEXISTS', KEYS[2], ARGV[1]) == 1 then
  return {0}
end
local rv = redis.call('INCR', KEYS[1])
local json = ARGV[2] .. rv .. ARGV[3]
redis.call('HSET', KEYS[2], ARGV[1], rv .. ':' .. #ARGV[2] .. ':' .. json)
redis.call('ZADD', KEYS[3], 0, ARGV[1])
redis.call('XADD', KEYS[4], 'MAXLEN', '~', ARGV[4], rv .. '-0', 't', 'A', 'k', ARGV[1], 'o', json)
redis.call('PUBLISH', ARGV[5], 'A' .. rv .. '\n' .. ARGV[1] .. '\n' .. json)
if ARGV[6] ~= '' then
  redis.call('PUBLISH', ARGV[6], ARGV[7] .. '\n' .. ARGV[1] .. '\n' .. rv)
end
return {1, rv}
