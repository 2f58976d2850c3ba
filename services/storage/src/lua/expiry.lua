-- Expiry of an object (prepended to every write script, after owners.lua). KEYS[7] is the
-- (tenant, resource)'s sorted set of `<namespace>/<name>` scored by the unix second at which
-- the object expires (keys.rs); Redis's own clock (TIME), so every replica agrees.
-- `ttl` (seconds, a string): > 0 sets the expiry `ttl` seconds from now, rounded up to the
-- next whole second (an object never goes before its ttl has passed), 0 removes it.
local function set_expiry(key, ttl)
  local secs = tonumber(ttl) or 0
  if secs > 0 then
    local t = redis.call('TIME')
    local at = tonumber(t[1]) + secs
    if tonumber(t[2]) > 0 then
      at = at + 1
    end
    redis.call('ZADD', KEYS[7], at, key)
  else
    redis.call('ZREM', KEYS[7], key)
  end
end
