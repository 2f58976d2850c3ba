-- Expiry of an object (prepended to every write script, after owners.lua). KEYS[7] is the
-- (tenant, resource)'s sorted set of `<namespace>/<name>` scored by the unix second at which
-- the object expires (keys.rs); Redis's own clock (TIME), so every replica agrees.
-- `ttl` (seconds, a string): > 0 sets the expiry `ttl` seconds from now, 0 removes it.
local function set_expiry(key, ttl)
  local secs = tonumber(ttl) or 0
  if secs > 0 then
    redis.call('ZADD', KEYS[7], tonumber(redis.call('TIME')[1]) + secs, key)
  else
    redis.call('ZREM', KEYS[7], key)
  end
end
