-- lock_leave: a waiter gives up; drop its queue place and pass the turn on.
--
-- KEYS[1] lock key
-- KEYS[2] queue key
-- KEYS[3] queue expiry key
-- KEYS[4] wake key   this waiter's own wake list (deleted)
-- ARGV[1] token      the waiter's token
-- ARGV[2] wake prefix
-- ARGV[3] wake_ttl_ms
--
-- Reply: 1 if the waiter still had a place, else 0.
--
-- If this waiter was woken just before giving up, the wake-up would be lost with it; so
-- when the lock is free, the next waiter is woken instead.

local had = redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('ZREM', KEYS[3], ARGV[1])
redis.call('DEL', KEYS[4])
if redis.call('EXISTS', KEYS[1]) == 0 then
    local head = redis.call('ZRANGE', KEYS[2], 0, 0)
    if head[1] then
        local wake = ARGV[2] .. head[1]
        redis.call('LPUSH', wake, 1)
        redis.call('PEXPIRE', wake, ARGV[3])
    end
end
return had
