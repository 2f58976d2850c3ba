-- Owner index (prepended to create/update/delete, after prelude.lua): KEYS[6] is the (tenant, resource)'s
-- sorted set of `<owner uid>\0<namespace>/<name>` (all scores 0), one member per
-- metadata.ownerReferences[].uid — the garbage collector's owner -> dependents lookup.
-- JSON is decoded only when the text mentions ownerReferences.
local function owner_uids(json)
  local out = {}
  if not json or not string.find(json, '"ownerReferences"', 1, true) then
    return out
  end
  local ok, o = pcall(cjson.decode, json)
  if ok and type(o) == 'table' and type(o.metadata) == 'table'
      and type(o.metadata.ownerReferences) == 'table' then
    for _, r in ipairs(o.metadata.ownerReferences) do
      if type(r) == 'table' and type(r.uid) == 'string' and r.uid ~= '' then
        out[#out + 1] = r.uid
      end
    end
  end
  return out
end
local function index_owners(key, old, new)
  for _, u in ipairs(owner_uids(old)) do
    redis.call('ZREM', KEYS[6], u .. '\0' .. key)
  end
  for _, u in ipairs(owner_uids(new)) do
    redis.call('ZADD', KEYS[6], 0, u .. '\0' .. key)
  end
end
