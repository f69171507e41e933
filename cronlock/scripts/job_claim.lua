-- job_claim: claim one slot of one job, in one round trip.
--
-- KEYS[1]  the job's state hash  P:job:{KEY}
-- ARGV[1]  slot, epoch ms (the scheduled occurrence, computed alike by every replica)
-- ARGV[2]  owner token of this attempt (random, unique per run)
-- ARGV[3]  lease length, ms (measured on this server's clock)
-- ARGV[4]  max_attempts (a lapsed lease of the same slot is taken over until this)
-- ARGV[5]  overlap policy for a newer slot while a run still holds a live lease:
--          "skip" (reply busy), "allow" (start; the old run keeps its own lease),
--          "replace" (start; the old run's next renew reports lost, so it is cancelled)
-- ARGV[6]  holder, "host:pid:runner" (for operators)
--
-- Reply, first element a status:
--   {"won", attempt, fence, lease_until}   this replica runs the slot (also when the same
--                                          owner asks again: a retry after a lost reply)
--   {"taken", lease_until, attempt, now}   same slot, running under a live lease elsewhere
--                                          (now: this server's clock, to time the re-check)
--   {"done", status}                       same slot already finished ("done" or "failed")
--   {"stale", current_slot}                an older slot than the latest claimed: never run
--   {"busy", lease_until, now}             newer slot, previous run alive, overlap "skip"
--   {"exhausted", attempt}                 lapsed again after max_attempts: slot marked failed
--   {"paused"}                             the job is paused
--   {"corrupt", type}                      the key is not a hash we wrote
local key = KEYS[1]
local kind = redis.call('TYPE', key)['ok']
if kind ~= 'hash' and kind ~= 'none' then
  return {'corrupt', kind}
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local slot = tonumber(ARGV[1])
local lease_ms = tonumber(ARGV[3])
local st = redis.call('HMGET', key, 'slot', 'status', 'attempt', 'owner', 'lease', 'fence', 'paused')
if st[7] == '1' then
  return {'paused'}
end
local cur = tonumber(st[1])
local status = st[2]
local attempt = tonumber(st[3]) or 0
local lease = tonumber(st[5]) or 0
local fence = tonumber(st[6]) or 0
if st[1] and not cur then
  return {'corrupt', 'slot'}
end

local function start(n)
  fence = fence + 1
  local until_ms = now + lease_ms
  redis.call('HSET', key, 'slot', slot, 'status', 'running', 'attempt', n,
    'owner', ARGV[2], 'lease', until_ms, 'fence', fence, 'holder', ARGV[6], 'started', now)
  return {'won', n, fence, until_ms}
end

if cur == nil then
  return start(1)
end
if slot < cur then
  return {'stale', cur}
end
if slot == cur then
  if status ~= 'running' then
    return {'done', status or 'done'}
  end
  if st[4] == ARGV[2] then
    -- our own claim again: the reply to the first one was lost on the way back
    return {'won', attempt, fence, lease}
  end
  if lease > now then
    return {'taken', lease, attempt, now}
  end
  if attempt >= tonumber(ARGV[4]) then
    redis.call('HSET', key, 'status', 'failed', 'owner', '', 'finished', now)
    return {'exhausted', attempt}
  end
  return start(attempt + 1)
end
-- a newer slot than the latest claimed: first forget older runs ("allow") whose lease lapsed
local fields = redis.call('HKEYS', key)
for _, f in ipairs(fields) do
  if string.sub(f, 1, 2) == 'r:' then
    local v = redis.call('HGET', key, f)
    local until_ms = tonumber(string.match(v, ':(%d+)$'))
    if not until_ms or until_ms <= now then
      redis.call('HDEL', key, f)
    end
  end
end
if status == 'running' and lease > now then
  local overlap = ARGV[5]
  if overlap == 'skip' then
    return {'busy', lease, now}
  elseif overlap == 'allow' then
    -- the old run keeps renewing and finishing under its own field
    redis.call('HSET', key, 'r:' .. st[4], st[1] .. ':' .. st[5])
  end
end
return start(1)
