-- job_renew: extend the lease of a running slot, only if this owner still holds it.
--
-- KEYS[1]  the job's state hash
-- ARGV[1]  slot, epoch ms
-- ARGV[2]  owner token
-- ARGV[3]  lease length, ms
--
-- Reply: {"ok", lease_until} or {"lost"} (someone took the slot over, a newer slot
-- replaced it, or the state is gone). A lost owner changes nothing.
local key = KEYS[1]
if redis.call('TYPE', key)['ok'] ~= 'hash' then
  return {'lost'}
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local until_ms = now + tonumber(ARGV[3])
local st = redis.call('HMGET', key, 'slot', 'status', 'owner')
if st[1] == ARGV[1] and st[2] == 'running' and st[3] == ARGV[2] then
  redis.call('HSET', key, 'lease', until_ms)
  return {'ok', until_ms}
end
local field = 'r:' .. ARGV[2]
local other = redis.call('HGET', key, field)
if other and string.sub(other, 1, #ARGV[1] + 1) == ARGV[1] .. ':' then
  -- keep what the field records of the run; only its lease ends later
  redis.call('HSET', key, field, (string.gsub(other, '%d+$', until_ms)))
  return {'ok', until_ms}
end
return {'lost'}
