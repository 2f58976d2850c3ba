-- One page of the ordered index. KEYS: rev, obj, idx. ARGV: min, max, count.
-- Returns {revision, remaining_after_page, key1, value1, key2, value2, ...}.
-- HMGET runs in chunks: Lua's unpack() is limited to a few thousand values.
local rev = tonumber(redis.call('GET', KEYS[1]) or '0')
local keys = redis.call('ZRANGEBYLEX', KEYS[3], ARGV[1], ARGV[2], 'LIMIT', 0, tonumber(ARGV[3]))
local out = {rev, 0}
if #keys == 0 then
  return out
end
local chunk = 1000
for s = 1, #keys, chunk do
  local e = math.min(s + chunk - 1, #keys)
  local vals = redis.call('HMGET', KEYS[2], unpack(keys, s, e))
  for i = s, e do
    local v = vals[i - s + 1]
    if v then
      out[#out + 1] = keys[i]
      out[#out + 1] = v
    end
  end
end
out[2] = redis.call('ZLEXCOUNT', KEYS[3], '(' .. keys[#keys], ARGV[2])
return out
