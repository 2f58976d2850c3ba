-- Create objects of one resource (one keyspace), in order; each as if on its own.
-- KEYS: rev, obj, idx, ev, evt, own, ttl (functions from prelude.lua, owners.lua and
-- expiry.lua). ARGV: history_len, channel, notify_channel ("" = none), tenant, then four per
-- object: key, head, tail (the JSON split at the resourceVersion slot), ttl seconds ("0" =
-- never expires).
-- Stored value: "<rv>:<offset>:<json>", offset = byte length of head (where the rv starts).
-- Returns, per object, its new revision, or 0 when the key already exists.
local out = {}
for i = 5, #ARGV, 4 do
  local key, head = ARGV[i], ARGV[i + 1]
  if redis.call('HEXISTS', KEYS[2], key) == 1 then
    out[#out + 1] = 0
  else
    local rv = nextrv()
    local json = head .. rv .. ARGV[i + 2]
    redis.call('HSET', KEYS[2], key, rv .. ':' .. #head .. ':' .. json)
    redis.call('ZADD', KEYS[3], 0, key)
    index_owners(key, nil, json)
    if ARGV[i + 3] ~= '0' then
      set_expiry(key, ARGV[i + 3])
    end
    history(rv, ARGV[1], 't', 'A', 'k', key, 'o', json)
    redis.call('%PUBLISH%', ARGV[2], 'A' .. rv .. '\n' .. key .. '\n' .. json)
    if ARGV[3] ~= '' then
      redis.call('PUBLISH', ARGV[3], ARGV[4] .. '\n' .. key .. '\n' .. rv)
    end
    out[#out + 1] = rv
  end
end
return out
