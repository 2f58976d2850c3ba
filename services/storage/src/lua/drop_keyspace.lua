-- A purged triple's keys but its revision counter (PurgeTenant, server.rs). KEYS: obj, idx,
-- ev, evt, own, ttl. Only while the triple holds no object (obj absent): an object written
-- after the caller deleted them all keeps its keys and history, for the next pass to delete
-- with a DELETED event.
-- Returns the number of keys removed (UNLINK), or -1 (objects exist; nothing removed).
if redis.call('EXISTS', KEYS[1]) == 1 then
  return -1
end
return redis.call('UNLINK', unpack(KEYS))
