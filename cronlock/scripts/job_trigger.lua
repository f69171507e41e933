-- job_trigger: start one requested manual run ("trigger") of a job, on one replica.
--
-- An operator's trigger request waits in a list; the first replica that runs this script
-- pops it, so exactly one replica runs it. The run gets its own slot (this server's clock,
-- ms) and fencing token and is kept under an "r:<owner>" field of the state hash, like a
-- run that overlap "allow" keeps alive: job_renew and job_finish handle it unchanged,
-- and the scheduled slots of the job go on beside it.
--
-- KEYS[1]  the job's state hash  P:job:{KEY}
-- KEYS[2]  the job's pending trigger requests (list)  P:trigger:{KEY}
-- KEYS[3]  the job's run history stream  P:history:{KEY}
-- ARGV[1]  owner token of this run
-- ARGV[2]  lease length, ms
-- ARGV[3]  overlap policy of the job ("skip" refuses while any run holds a live lease)
-- ARGV[4]  holder, "host:pid:runner"
-- ARGV[5]  history: keep at most this many entries (0: no history)
-- ARGV[6]  history: drop entries older than this many ms (0: no age limit)
--
-- A request is "id|force|requested_ms|requested_by|expires_ms"; force ("1") ignores pause
-- and overlap; a request taken at or after expires_ms (this server's clock, ms) is dropped
-- whatever force says. Requests of older versions have no expires_ms: they never expire.
--
-- Reply:
--   {"none"}                                 no request is waiting
--   {"won", slot, fence, lease_until, id}    this replica runs it
--   {"paused", id} / {"busy", id}            request dropped (history says why)
--   {"expired", id}                          request dropped: taken after expires_ms
--   {"corrupt", type}                        the state key is not a hash we wrote
local key = KEYS[1]
local kind = redis.call('TYPE', key)['ok']
if kind ~= 'hash' and kind ~= 'none' then
  return {'corrupt', kind}
end
local request = redis.call('LPOP', KEYS[2])
if not request then
  return {'none'}
end
local id, force, requested, by, expires =
  string.match(request, '^([^|]*)|([^|]*)|([^|]*)|([^|]*)|(%d+)$')
if not id then
  id, force, requested, by = string.match(request, '^([^|]*)|([^|]*)|([^|]*)|(.*)$')
end
if not id then
  return {'corrupt', 'trigger'}
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

local function history(...)
  local keep = tonumber(ARGV[5]) or 0
  if keep <= 0 then
    return
  end
  redis.call('XADD', KEYS[3], 'MAXLEN', keep, '*', 'kind', 'manual', 'trigger', id,
    'requested', requested, 'requested_by', by, ...)
  local age = tonumber(ARGV[6]) or 0
  if age > 0 then
    redis.call('XTRIM', KEYS[3], 'MINID', now - age)
  end
end

if expires and now >= tonumber(expires) then
  history('event', 'skipped', 'reason', 'expired', 'holder', ARGV[4], 'expires', expires)
  return {'expired', id}
end
local st = redis.call('HMGET', key, 'status', 'lease', 'fence', 'paused')
if force ~= '1' then
  if st[4] == '1' then
    history('event', 'skipped', 'reason', 'paused', 'holder', ARGV[4])
    return {'paused', id}
  end
  if ARGV[3] == 'skip' then
    local live = st[1] == 'running' and (tonumber(st[2]) or 0) > now
    if not live then
      for _, f in ipairs(redis.call('HKEYS', key)) do
        if string.sub(f, 1, 2) == 'r:' then
          local until_ms = tonumber(string.match(redis.call('HGET', key, f), ':(%d+)$'))
          if until_ms and until_ms > now then
            live = true
            break
          end
        end
      end
    end
    if live then
      history('event', 'skipped', 'reason', 'busy', 'holder', ARGV[4])
      return {'busy', id}
    end
  end
end
local fence = redis.call('HINCRBY', key, 'fence', 1)
local until_ms = now + tonumber(ARGV[2])
redis.call('HSET', key, 'r:' .. ARGV[1], now .. ':' .. until_ms)
history('event', 'running', 'slot', now, 'attempt', 1, 'fence', fence, 'holder', ARGV[4],
  'started', now, 'lease', until_ms)
return {'won', now, fence, until_ms, id}
