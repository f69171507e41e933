-- job_finish: record the end of a run, only if this owner still holds the slot.
--
-- KEYS[1]  the job's state hash
-- ARGV[1]  slot, epoch ms
-- ARGV[2]  owner token
-- ARGV[3]  outcome: "done" | "failed" (the slot is finished either way) or
--          "handover" (stopping gracefully: the lease ends now, so another replica
--          takes the same slot over at its next look instead of waiting for the lease)
--
-- Reply: {"ok"} or {"lost"} (a successor owns the slot: nothing is overwritten).
local key = KEYS[1]
if redis.call('TYPE', key)['ok'] ~= 'hash' then
  return {'lost'}
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local outcome = ARGV[3]
local st = redis.call('HMGET', key, 'slot', 'status', 'owner')
if st[1] == ARGV[1] and st[2] == 'running' and st[3] == ARGV[2] then
  if outcome == 'handover' then
    redis.call('HSET', key, 'lease', now)
  else
    redis.call('HSET', key, 'status', outcome, 'owner', '', 'lease', now, 'finished', now,
      'last_' .. outcome, ARGV[1])
  end
  return {'ok'}
end
local field = 'r:' .. ARGV[2]
local other = redis.call('HGET', key, field)
if other and string.sub(other, 1, #ARGV[1] + 1) == ARGV[1] .. ':' then
  redis.call('HDEL', key, field)
  return {'ok'}
end
return {'lost'}
