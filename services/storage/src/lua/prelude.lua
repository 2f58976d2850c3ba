-- Prepended to every write script (create, update, delete) by store.rs `WriteScripts`, with
-- the two constants filled in; so the script's SHA changes with the recovery epoch.
-- KEYS (every write script): rev, obj, idx, ev, evt, own (owners.lua), ttl (expiry.lua).
-- `%PUBLISH%` in the scripts (the live event of the triple's channel, which shares the
-- triple's hash tag) is SPUBLISH on a Redis Cluster, so the event reaches only the shard that
-- owns the slot, and PUBLISH on one server; the cross-tenant change notifications stay
-- PUBLISH (their channel is not in the triple's slot).
--
-- FLOOR: the revision floor of the current recovery epoch. A new epoch starts whenever the
-- Redis server changed (restart, failover: new run_id), and its floor lies beyond every
-- revision that could have been handed out before, so a revision lost with unsynced AOF
-- data is never handed out again (see store.rs `epoch`).
-- WINDOW: seconds of watch history kept (0 = trimmed by length only). `evt` is a list of
-- "<unix second>:<first rv written in that second>" checkpoints, one per second with writes;
-- each write drops the checkpoints older than WINDOW and trims the stream (XTRIM MINID) to
-- the first revision of the oldest second still inside the window.
local FLOOR = %FLOOR%
local WINDOW = %WINDOW%

local function nextrv()
  local rv = redis.call('INCR', KEYS[1])
  if rv <= FLOOR then
    rv = FLOOR + 1
    redis.call('SET', KEYS[1], rv)
  end
  return rv
end

local function checkpoint_second(c)
  return tonumber(string.match(c, '^(%d+)'))
end

-- Appends history entry `rv` (fields ...) bounded by `maxlen` entries, then trims by age.
local function history(rv, maxlen, ...)
  redis.call('XADD', KEYS[4], 'MAXLEN', '~', maxlen, rv .. '-0', ...)
  if WINDOW <= 0 then
    return
  end
  local now = tonumber(redis.call('TIME')[1])
  local last = redis.call('LINDEX', KEYS[5], -1)
  if not last or checkpoint_second(last) < now then
    redis.call('RPUSH', KEYS[5], now .. ':' .. rv)
  end
  local cutoff = now - WINDOW
  local first = redis.call('LINDEX', KEYS[5], 0)
  if checkpoint_second(first) < cutoff then
    repeat
      redis.call('LPOP', KEYS[5])
      first = redis.call('LINDEX', KEYS[5], 0)
    until checkpoint_second(first) >= cutoff
    redis.call('XTRIM', KEYS[4], 'MINID', '~', string.match(first, ':(%d+)$') .. '-0')
  end
end

