-- Compare-and-swap update. KEYS: rev, obj, idx, ev, evt, own, ttl
-- (functions from prelude.lua, owners.lua and expiry.lua). ARGV: key, head, tail, history_len,
-- channel, expected_rv ("0" = unconditional), notify_channel ("" = none), tenant, ttl seconds
-- ("0" = never expires: an expiry set by an earlier write is removed).
-- The MODIFIED event also carries the previous state with this write's revision spliced in
-- at its stored offset (field 'p' in history; `M<rv>\n<key>\n<len(prev)>\n<prev><json>` on
-- pub/sub): filtered watches need it to turn selector transitions into ADDED/DELETED, and a
-- DELETED made that way shows the previous content at the event's revision (upstream
-- cacher cache_watcher.go convertToWatchEvent).
local cur = redis.call('HGET', KEYS[2], ARGV[1])
if not cur then
  return {0}
end
local currv, off = string.match(cur, '^(%d+):(%d+):')
if ARGV[6] ~= '0' and ARGV[6] ~= currv then
  return {-1, currv}
end
local rv = nextrv()
local json = ARGV[2] .. rv .. ARGV[3]
local old = string.sub(cur, #currv + #off + 3)
off = tonumber(off)
local prev = string.sub(old, 1, off) .. rv .. string.sub(old, off + 1 + #currv)
redis.call('HSET', KEYS[2], ARGV[1], rv .. ':' .. #ARGV[2] .. ':' .. json)
index_owners(ARGV[1], old, json)
set_expiry(ARGV[1], ARGV[9])
history(rv, ARGV[4], 't', 'M', 'k', ARGV[1], 'o', json, 'p', prev)
redis.call('%PUBLISH%', ARGV[5], 'M' .. rv .. '\n' .. ARGV[1] .. '\n' .. #prev .. '\n' .. prev .. json)
if ARGV[7] ~= '' then
  redis.call('PUBLISH', ARGV[7], ARGV[8] .. '\n' .. ARGV[1] .. '\n' .. rv)
end
return {1, rv}
