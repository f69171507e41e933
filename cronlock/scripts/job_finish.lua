-- job_finish: record the end of a run, only if this owner still holds the slot.
--
-- KEYS[1]  the job's state hash
-- KEYS[2]  (optional) the job's run history stream (same hash tag)
-- ARGV[1]  slot, epoch ms
-- ARGV[2]  owner token
-- ARGV[3]  outcome: "done" | "failed" (the slot is finished either way) or
--          "handover" (stopping gracefully: the lease ends now, so another replica
--          takes the same slot over at its next look instead of waiting for the lease)
-- ARGV[4]  (optional, with ARGV[5..12]) history: keep at most this many entries (0: none)
-- ARGV[5]  history: drop entries older than this many ms (0: no age limit)
-- ARGV[6]  attempt       ARGV[7]  fencing token     ARGV[8]  holder "host:pid:runner"
-- ARGV[9]  duration, ms (handler start to end, measured by the runner)
-- ARGV[10] error type ("" if none)   ARGV[11] traceback, truncated ("" if none)
-- ARGV[12] kind: "scheduled" or "manual" (a triggered run)
-- ARGV[13] (optional, with ARGV[4..12]) the prefix's events channel, and
-- ARGV[14] the message published on it when a finished ("done"/"failed") slot was
--          watched (a replica told "taken" asked to be woken: job_claim ARGV[10])
--
-- Summary fields kept in the state hash for alerting ("dead man's switch"):
--   done:   last_done (slot), done_at (ms), failures = 0
--   failed: last_failed (slot), failed_at (ms), failures + 1, last_error (type)
--
-- History entry (when ARGV[4] > 0): event "succeeded" | "failed" | "cancelled" (handover).
--
-- Reply: {"ok"} or {"lost"} (a successor owns the slot: nothing is overwritten).
local key = KEYS[1]
-- HMGET refuses a key of another type (then nothing of ours is there): no TYPE first
local st = redis.pcall('HMGET', key, 'slot', 'status', 'owner', 'watched')
if st.err then
  return {'lost'}
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local outcome = ARGV[3]

-- ``fields`` (state fields to write, maybe none) and the outcome's summary fields, in one
-- HSET; a failure is counted too
local function write_with_summary(fields)
  local extra = {}
  if outcome == 'done' then
    extra = {'last_done', ARGV[1], 'done_at', now, 'failures', 0}
  elseif outcome == 'failed' then
    extra = {'last_failed', ARGV[1], 'failed_at', now, 'last_error', ARGV[10] or ''}
  end
  for _, v in ipairs(extra) do
    table.insert(fields, v)
  end
  if #fields > 0 then
    redis.call('HSET', key, unpack(fields))
  end
  if outcome == 'failed' then
    redis.call('HINCRBY', key, 'failures', 1)
  end
end

local function history()
  local keep = tonumber(ARGV[4] or '0') or 0
  if keep <= 0 or not KEYS[2] then
    return
  end
  local event = ({done = 'succeeded', failed = 'failed', handover = 'cancelled'})[outcome]
    or outcome
  redis.call('XADD', KEYS[2], 'MAXLEN', keep, '*', 'event', event, 'slot', ARGV[1],
    'attempt', ARGV[6], 'fence', ARGV[7], 'holder', ARGV[8], 'finished', now,
    'duration_ms', ARGV[9], 'error_type', ARGV[10], 'traceback', ARGV[11], 'kind', ARGV[12])
  local age = tonumber(ARGV[5]) or 0
  if age > 0 then
    redis.call('XTRIM', KEYS[2], 'MINID', now - age)
  end
end

if st[1] == ARGV[1] and st[2] == 'running' and st[3] == ARGV[2] then
  if outcome == 'handover' then
    redis.call('HSET', key, 'lease', now)
  else
    write_with_summary({'status', outcome, 'owner', '', 'lease', now, 'finished', now})
    if ARGV[13] and st[4] == ARGV[1] then
      redis.call('HDEL', key, 'watched')
      redis.call('PUBLISH', ARGV[13], ARGV[14])
    end
  end
  history()
  return {'ok'}
end
local field = 'r:' .. ARGV[2]
local other = redis.call('HGET', key, field)
if other and string.sub(other, 1, #ARGV[1] + 1) == ARGV[1] .. ':' then
  redis.call('HDEL', key, field)
  write_with_summary({})
  history()
  return {'ok'}
end
return {'lost'}
