-- Delete one object, optionally only at an expected rv. KEYS: rev, obj, idx, ev, evt, own
-- (functions from prelude.lua and owners.lua).
-- ARGV: key, history_len, channel, expected_rv ("0" = unconditional), notify_channel ("" = none),
-- tenant.
-- The DELETED event carries the last state with the deletion revision spliced in at the
-- stored offset (no JSON parsing).
local cur = redis.call('HGET', KEYS[2], ARGV[1])
if not cur then
  return {0}
end
local currv, off = string.match(cur, '^(%d+):(%d+):')
if ARGV[4] ~= '0' and ARGV[4] ~= currv then
  return {-1, currv}
end
local json = string.sub(cur, #currv + #off + 3)
off = tonumber(off)
local rv = nextrv()
local dead = string.sub(json, 1, off) .. rv .. string.sub(json, off + 1 + #currv)
redis.call('HDEL', KEYS[2], ARGV[1])
redis.call('ZREM', KEYS[3], ARGV[1])
index_owners(ARGV[1], json, nil)
history(rv, ARGV[2], 't', 'D', 'k', ARGV[1], 'o', dead)
redis.call('PUBLISH', ARGV[3], 'D' .. rv .. '\n' .. ARGV[1] .. '\n' .. dead)
if ARGV[5] ~= '' then
  redis.call('PUBLISH', ARGV[5], ARGV[6] .. '\n' .. ARGV[1] .. '\n' .. rv)
end
return {1, rv, dead}
