-- One page of the garbage collector's resync (after owners.lua). KEYS: rev, obj, idx, ev, evt,
-- own (the write scripts' order; only obj, idx and own are used). ARGV: min (ZRANGEBYLEX bound
-- after the previous page), count.
-- Returns {repaired, examined, last_key, key1, value1, key2, value2, ...}: of the `count`
-- keys after min, those whose object has owner references, with their stored values; each
-- such object's owner-index entries are added where missing (ZADD counts the new ones), in
-- the same atomic step as the read, so an entry is never written for a reference a
-- concurrent write has just removed.
local keys = redis.call('ZRANGEBYLEX', KEYS[3], ARGV[1], '+', 'LIMIT', 0, tonumber(ARGV[2]))
local out = {0, #keys, ''}
if #keys == 0 then
  return out
end
out[3] = keys[#keys]
local chunk = 1000
for s = 1, #keys, chunk do
  local e = math.min(s + chunk - 1, #keys)
  local vals = redis.call('HMGET', KEYS[2], unpack(keys, s, e))
  for i = s, e do
    local v = vals[i - s + 1]
    if v then
      local rv, off = string.match(v, '^(%d+):(%d+):')
      if rv then
        local uids = owner_uids(string.sub(v, #rv + #off + 3))
        if #uids > 0 then
          for _, u in ipairs(uids) do
            out[1] = out[1] + redis.call('ZADD', KEYS[6], 0, u .. '\0' .. keys[i])
          end
          out[#out + 1] = keys[i]
          out[#out + 1] = v
        end
      end
    end
  end
end
return out
