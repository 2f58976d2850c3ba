-- The expiry sweeper's step on one (tenant, resource) (after prelude.lua, owners.lua and
-- remove.lua). KEYS: rev, obj, idx, ev, evt, own, ttl. ARGV: history_len, channel,
-- notify_channel ("" = none), tenant, limit.
-- Deletes up to `limit` objects whose expiry (score in KEYS[7], unix seconds) is at or before
-- Redis's own clock now, each by the one delete of remove.lua (DELETED event, new revision).
-- The due members are read inside this atomic script, so an update that moved an expiry out
-- meanwhile, or another replica that swept them first, leaves nothing to do here; a member
-- whose object is gone is dropped.
-- Returns {deleted, due}: due = members examined (= limit: more may be due).
local now = tonumber(redis.call('TIME')[1])
local due = redis.call('ZRANGEBYSCORE', KEYS[7], '-inf', now, 'LIMIT', 0, tonumber(ARGV[5]))
local deleted = 0
for _, key in ipairs(due) do
  local r = remove_object(key, ARGV[1], ARGV[2], '0', ARGV[3], ARGV[4])
  if r[1] == 1 then
    deleted = deleted + 1
  else
    redis.call('ZREM', KEYS[7], key)
  end
end
return {deleted, #due}
