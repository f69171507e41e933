-- lock_release: compare-and-delete a lock by token, then wake the first waiter.
--
-- KEYS[1] lock key
-- KEYS[2] queue key        (zset: waiting tokens by arrival)
-- KEYS[3] queue expiry key (zset: when each waiter's place lapses, ms)
-- ARGV[1] token            the releasing holder's token
-- ARGV[2] wake prefix      the first waiter's wake list is prefix .. its token (same
--                          hash tag as KEYS, so the same Redis Cluster slot)
-- ARGV[3] wake_ttl_ms      lifetime of the wake signal if nobody pops it
--
-- Reply: 1 if the lock was still ours and is now deleted; 0 if it was not ours (expired,
-- or held by someone else: that holder's key is left untouched).
--
-- Whenever the lock is free afterwards, the first live waiter is woken with one LPUSH on
-- its own list, so exactly one waiter retries at once (others keep blocking).

local owned = 0
local current = redis.call('GET', KEYS[1])
if current == ARGV[1] then
    redis.call('DEL', KEYS[1])
    owned = 1
elseif current then
    return 0
end

if redis.call('EXISTS', KEYS[2]) == 0 then  -- nobody waits: the common case
    return owned
end
local t = redis.call('TIME')
local now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local expired = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', now_ms, 'LIMIT', 0, 100)
if #expired > 0 then
    redis.call('ZREM', KEYS[2], unpack(expired))
    redis.call('ZREM', KEYS[3], unpack(expired))
end
local head = redis.call('ZRANGE', KEYS[2], 0, 0)
if head[1] then
    local wake = ARGV[2] .. head[1]
    redis.call('LPUSH', wake, 1)
    redis.call('PEXPIRE', wake, ARGV[3])
end
return owned
