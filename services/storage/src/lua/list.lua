-- One page of the ordered index. KEYS: rev, obj, idx, ev. ARGV: min, max, count, exact_rv, floor.
-- Returns {revision, remaining_after_page, n_later, first_later_rv, later_key_1 .. later_key_n,
--          key1, value1, key2, value2, ...}.
-- When 0 < exact_rv < revision, the keys written after exact_rv (events exact_rv+1 ..
-- revision in the history) are returned with the rv of the first such event still in the
-- history, all in this one atomic step, so the caller can tell whether the page equals the
-- state at exact_rv (no write after it touched a key the page could hold) and whether the
-- history still covers every write after exact_rv (first_later_rv == exact_rv + 1).
-- HMGET runs in chunks: Lua's unpack() is limited to a few thousand values.
-- ARGV[5]: the recovery epoch's revision floor. A resource never written has no counter: it
-- starts here at max(floor, 1), so the list's resourceVersion is never "0" (a watch from "0"
-- means "any": the current state as synthetic ADDED events, not the writes after the list)
-- and the first write (INCR, prelude.lua nextrv) lands right after it (upstream: the etcd
-- revision a list returns is >= 1 and every later write is above it).
local rev = tonumber(redis.call('GET', KEYS[1]) or '0')
if rev == 0 then
  rev = math.max(tonumber(ARGV[5]), 1)
  redis.call('SET', KEYS[1], rev)
end
local exact = tonumber(ARGV[4])
local out = {rev, 0, 0, 0}
if exact > 0 and exact < rev then
  local evs = redis.call('XRANGE', KEYS[4], (exact + 1) .. '-0', '+')
  local seen = {}
  for i = 1, #evs do
    if i == 1 then
      out[4] = tonumber(string.match(evs[1][1], '^(%d+)'))
    end
    local f = evs[i][2]
    for j = 1, #f, 2 do
      if f[j] == 'k' then
        local k = f[j + 1]
        if not seen[k] then
          seen[k] = true
          out[#out + 1] = k
          out[3] = out[3] + 1
        end
        break
      end
    end
  end
end
local keys = redis.call('ZRANGEBYLEX', KEYS[3], ARGV[1], ARGV[2], 'LIMIT', 0, tonumber(ARGV[3]))
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
