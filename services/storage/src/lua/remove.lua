-- The one delete of a stored object (prepended to delete.lua and expire.lua, after prelude.lua
-- and owners.lua): optionally only at an expected rv. KEYS: rev, obj, idx, ev, evt, own, ttl.
-- Removes the object from obj/idx/own/ttl, appends the DELETED history entry and publishes it,
-- bumps the revision. The DELETED event carries the last state with the deletion revision
-- spliced in at the stored offset (no JSON parsing).
-- Returns {0} (absent), {-1, current_rv} (expected rv differs) or {1, rv, last_state}.
local function remove_object(key, maxlen, channel, expected, notify, tenant)
  local cur = redis.call('HGET', KEYS[2], key)
  if not cur then
    return {0}
  end
  local currv, off = string.match(cur, '^(%d+):(%d+):')
  if expected ~= '0' and expected ~= currv then
    return {-1, currv}
  end
  local json = string.sub(cur, #currv + #off + 3)
  off = tonumber(off)
  local rv = nextrv()
  local dead = string.sub(json, 1, off) .. rv .. string.sub(json, off + 1 + #currv)
  redis.call('HDEL', KEYS[2], key)
  redis.call('ZREM', KEYS[3], key)
  redis.call('ZREM', KEYS[7], key)
  index_owners(key, json, nil)
  history(rv, maxlen, 't', 'D', 'k', key, 'o', dead)
  redis.call('%PUBLISH%', channel, 'D' .. rv .. '\n' .. key .. '\n' .. dead)
  if notify ~= '' then
    redis.call('PUBLISH', notify, tenant .. '\n' .. key .. '\n' .. rv)
  end
  return {1, rv, dead}
end
