-- Compare-and-swap update. KEYS: rev, obj, idx, ev. ARGV: key, head, tail, history_len, channel,
-- expected_rv ("0" = unconditional), notify_channel ("" = none), tenant.
local cur = redis.call('HGET', KEYS[2], ARGV[1])
if not cur then
  return {0}
end
local currv = string.match(cur, '^(%d+):')
if ARGV[6] ~= '0' and ARGV[6] ~= currv then
  return {-1, currv}
end
local rv = redis.call('INCR', KEYS[1])
local json = ARGV[2] .. rv .. ARGV[3]
redis.call('HSET', KEYS[2], ARGV[1], rv .. ':' .. #ARGV[2] .. ':' .. json)
redis.call('XADD', KEYS[4], 'MAXLEN', '~', ARGV[4], rv .. '-0', 't', 'M', 'k', ARGV[1], 'o', json)
redis.call('PUBLISH', ARGV[5], 'M' .. rv .. '\n' .. ARGV[1] .. '\n' .. json)
if ARGV[7] ~= '' then
  redis.call('PUBLISH', ARGV[7], ARGV[8] .. '\n' .. ARGV[1] .. '\n' .. rv)
end
return {1, rv}
