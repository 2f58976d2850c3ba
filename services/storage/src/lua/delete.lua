-- Delete one object, optionally only at an expected rv. KEYS: rev, obj, idx, ev, evt, own, ttl
-- (functions from prelude.lua, owners.lua and remove.lua).
-- ARGV: key, history_len, channel, expected_rv ("0" = unconditional), notify_channel ("" = none),
-- tenant.
return remove_object(ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6])
