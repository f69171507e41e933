-- job_claim: claim one slot of one job, in one round trip; record a win in the history.
--
-- KEYS[1]  the job's state hash  P:job:{KEY}
-- KEYS[2]  (optional) the job's run history stream  P:history:{KEY} (same hash tag)
-- ARGV[1]  slot, epoch ms (the scheduled occurrence, computed alike by every replica)
-- ARGV[2]  owner token of this attempt (random, unique per run)
-- ARGV[3]  lease length, ms (measured on this server's clock)
-- ARGV[4]  max_attempts (a lapsed lease of the same slot is taken over until this)
-- ARGV[5]  overlap policy for a newer slot while a run still holds a live lease:
--          "skip" (reply busy; also while a triggered run holds a live lease),
--          "allow" (start; the old run keeps its own lease),
--          "replace" (start; the old run's next renew reports lost, so it is cancelled)
-- ARGV[6]  holder, "host:pid:runner" (for operators)
-- ARGV[7]  (optional) history: keep at most this many entries (0 or absent: no history)
-- ARGV[8]  (optional) history: drop entries older than this many ms (0: no age limit)
-- ARGV[9]  (optional) "1": a re-check of a slot this replica was told is running elsewhere
--          (taken, or handed over): take over a lapsed lease, but never start the slot
--          afresh; when the job's state no longer names the slot, reply gone
-- ARGV[10] (optional, with ARGV[7..9]) "1": wake me. On a "taken" reply the state notes
--          the slot as watched ("watched" field), so the holder's finish announces it
--          (job_finish) and this replica drops its re-check; sent when the re-check at
--          the lease's end would come before the job's next slot
--
-- Reply, first element a status:
--   {"won", attempt, fence, lease_until, [slot, attempt]...}
--                                          this replica runs the slot (also when the same
--                                          owner asks again: a retry after a lost reply,
--                                          whose lease then starts again); then each older
--                                          run recorded as ended by this claim (below)
--   {"taken", lease_until, attempt, now}   same slot, running under a live lease elsewhere
--                                          (now: this server's clock, to time the re-check)
--   {"done", status}                       same slot already finished ("done" or "failed")
--   {"stale", current_slot}                an older slot than the latest claimed: never run
--   {"busy", lease_until, now, [slot, attempt]...}
--                                          newer slot, previous run alive, overlap "skip"
--   {"gone"}                               a re-check (ARGV[9]) found no state of the slot:
--                                          the store forgot it (an empty restart); not run
--   {"exhausted", attempt}                 lapsed again after max_attempts: slot marked failed
--   {"paused"}                             the job is paused
--   {"corrupt", type}                      the key is not a hash we wrote
--
-- History entries (XADD, ids from this server's clock; only on a state change, so a
-- losing claim writes nothing but the "watched" field of ARGV[10]): "running" on a win, "taken_over" for the attempt whose
-- lease lapsed, "abandoned" after max_attempts, "expired" for a run that never finished
-- before a newer slot started, "replaced" for a run cut short by overlap "replace".
--
-- Runs that vanish: a newer slot's claim records as ended every older run whose lease
-- lapsed without a finish: the latest slot's run ("expired") and the runs kept under
-- "r:<owner>" fields (overlap "allow", triggered runs: "abandoned"). Each counts as a
-- failure (failures + 1, last_error the event) and is listed in the reply, so the
-- claiming replica reports it to on_error.
--
-- An "r:<owner>" field is "slot:attempt:fence:holder:lease_until" (overlap "allow") or
-- "slot:lease_until" (a triggered run: attempt 1, kind manual).
local key = KEYS[1]
-- HMGET refuses a key of another type: only then is the type asked for (one call less
-- on every claim than asking first)
local st = redis.pcall('HMGET', key, 'slot', 'status', 'attempt', 'owner', 'lease', 'fence',
  'paused', 'holder')
if st.err then
  return {'corrupt', redis.call('TYPE', key)['ok']}
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local slot = tonumber(ARGV[1])
local lease_ms = tonumber(ARGV[3])
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

local keep = tonumber(ARGV[7] or '0') or 0
local function history(...)
  if keep <= 0 or not KEYS[2] then
    return
  end
  redis.call('XADD', KEYS[2], 'MAXLEN', keep, '*', ...)
  local age = tonumber(ARGV[8] or '0') or 0
  if age > 0 then
    redis.call('XTRIM', KEYS[2], 'MINID', now - age)
  end
end

local function previous(event)
  history('event', event, 'slot', st[1], 'attempt', attempt, 'fence', fence,
    'holder', st[8] or '', 'lease', lease, 'kind', 'scheduled')
end

local ended = {}  -- slot, attempt of each older run recorded as ended
local function vanished(event, v_slot, v_attempt, v_fence, v_holder, v_kind)
  redis.call('HSET', key, 'last_failed', v_slot, 'failed_at', now, 'last_error', event)
  redis.call('HINCRBY', key, 'failures', 1)
  history('event', event, 'slot', v_slot, 'attempt', v_attempt, 'fence', v_fence,
    'holder', v_holder, 'kind', v_kind)
  table.insert(ended, tonumber(v_slot))
  table.insert(ended, tonumber(v_attempt))
end

local function with_ended(reply)
  for _, v in ipairs(ended) do
    table.insert(reply, v)
  end
  return reply
end

local function start(n)
  fence = fence + 1
  local until_ms = now + lease_ms
  redis.call('HSET', key, 'slot', slot, 'status', 'running', 'attempt', n,
    'owner', ARGV[2], 'lease', until_ms, 'fence', fence, 'holder', ARGV[6], 'started', now)
  history('event', 'running', 'slot', slot, 'attempt', n, 'fence', fence,
    'holder', ARGV[6], 'started', now, 'lease', until_ms, 'kind', 'scheduled')
  return with_ended({'won', n, fence, until_ms})
end

local recheck = ARGV[9] == '1'
if cur == nil then
  if recheck then
    return {'gone'}
  end
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
    -- our own claim again: the reply to the first one was lost on the way back. The
    -- lease starts again now: the owner counts it from this call, and renews a third
    -- of a lease later, so the first claim's lease could lapse before that renewal.
    local until_ms = now + lease_ms
    redis.call('HSET', key, 'lease', until_ms)
    return {'won', attempt, fence, until_ms}
  end
  if lease > now then
    if ARGV[10] == '1' then
      redis.call('HSET', key, 'watched', ARGV[1])
    end
    return {'taken', lease, attempt, now}
  end
  if attempt >= tonumber(ARGV[4]) then
    redis.call('HSET', key, 'status', 'failed', 'owner', '', 'finished', now,
      'last_failed', slot, 'failed_at', now, 'last_error', 'abandoned')
    redis.call('HINCRBY', key, 'failures', 1)
    previous('abandoned')
    return {'exhausted', attempt}
  end
  previous('taken_over')
  return start(attempt + 1)
end
if recheck then
  -- told this slot was running, yet the state names an older one: the state was lost
  return {'gone'}
end
-- a newer slot than the latest claimed: first record as ended the older runs ("allow",
-- triggered runs) whose lease lapsed; under "skip" a live one makes the new slot wait
-- like the main run
local overlap = ARGV[5]
local fields = redis.call('HKEYS', key)
local other_until = 0
for _, f in ipairs(fields) do
  if string.sub(f, 1, 2) == 'r:' then
    local v = redis.call('HGET', key, f)
    local until_ms = tonumber(string.match(v, ':(%d+)$'))
    if not until_ms or until_ms <= now then
      redis.call('HDEL', key, f)
      local s4, a4, f4, h4 = string.match(v, '^(%d+):(%d+):(%d+):(.*):%d+$')
      if s4 then
        vanished('abandoned', s4, a4, f4, h4, 'scheduled')
      elseif until_ms then
        vanished('abandoned', string.match(v, '^(%d+):'), 1, 0, '', 'manual')
      end
    elseif until_ms > other_until then
      other_until = until_ms
    end
  end
end
if status == 'running' and lease > now then
  if overlap == 'skip' then
    return with_ended({'busy', lease, now})
  elseif overlap == 'allow' then
    -- the old run keeps renewing and finishing under its own field
    redis.call('HSET', key, 'r:' .. st[4],
      st[1] .. ':' .. attempt .. ':' .. fence .. ':' .. (st[8] or '') .. ':' .. st[5])
  else
    previous('replaced')
  end
elseif overlap == 'skip' and other_until > now then
  return with_ended({'busy', other_until, now})
elseif status == 'running' then
  vanished('expired', st[1], attempt, fence, st[8] or '', 'scheduled')
end
return start(1)
