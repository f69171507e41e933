-- lock_acquire: try to take a lock in one round trip, joining the wait queue on a loss.
--
-- KEYS[1] lock key         (string: the holder's token, PX = ttl)
-- KEYS[2] meta key         (hash: fence, holder, since, token; PX = ttl + grace)
-- KEYS[3] queue key        (zset: waiting tokens scored by arrival, microseconds)
-- KEYS[4] queue expiry key (zset: waiting tokens scored by when their place lapses, ms)
-- KEYS[5] wake key         (list: this acquirer's wake-up signal; deleted on a win)
-- ARGV[1] token            random, unique per acquire
-- ARGV[2] ttl_ms           lock lifetime in milliseconds
-- ARGV[3] holder           "host:pid", for operators (cronlock.inspect)
-- ARGV[4] grace_ms         how long the meta hash (and so the fence) outlives the lock
-- ARGV[5] place_ms         0: do not wait; > 0: wait, keeping the queue place this long
-- ARGV[6] arrival_us       "" on the first try; then the arrival the previous reply gave
--
-- Reply:
--   {1, fence}                   won; fence is the fencing token (strictly increasing)
--   {0, pttl_ms, arrival_us}     lost; pttl_ms of the holder's lock (-2: free, but an
--                                earlier waiter goes first); arrival_us is this waiter's
--                                place (0 when not waiting)
--
-- The fence is max(stored fence + 1, Redis TIME in microseconds). The stored fence lives
-- in the meta hash, which expires grace_ms after the lock, so memory stays bounded per
-- key; after it expires the time component keeps tokens increasing, as long as the
-- Redis server's clock does not step back by more than grace_ms.

local token = ARGV[1]
local t = redis.call('TIME')
local now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])

-- Forget waiters whose place lapsed (they died or gave up without saying so). Without
-- a queue (the common, uncontended case) there is nothing to look at.
local head = {}
if redis.call('EXISTS', KEYS[3]) == 1 then
    local expired = redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', now_ms, 'LIMIT', 0, 100)
    if #expired > 0 then
        redis.call('ZREM', KEYS[3], unpack(expired))
        redis.call('ZREM', KEYS[4], unpack(expired))
    end
    head = redis.call('ZRANGE', KEYS[3], 0, 0)
end

local place_ms = tonumber(ARGV[5])
if redis.call('EXISTS', KEYS[1]) == 0 then
    if head[1] == nil or head[1] == token then
        redis.call('SET', KEYS[1], token, 'PX', ARGV[2])
        local stored = tonumber(redis.call('HGET', KEYS[2], 'fence') or '0') or 0
        local fence = math.max(stored + 1, now_us)
        redis.call('HSET', KEYS[2], 'fence', string.format('%.0f', fence),
            'holder', ARGV[3], 'since', string.format('%.0f', now_ms), 'token', token)
        redis.call('PEXPIRE', KEYS[2], tonumber(ARGV[2]) + tonumber(ARGV[4]))
        if place_ms > 0 then
            redis.call('ZREM', KEYS[3], token)
            redis.call('ZREM', KEYS[4], token)
            redis.call('DEL', KEYS[5])
        end
        return {1, fence}
    end
end

local arrival = 0
if place_ms > 0 then
    arrival = tonumber(ARGV[6]) or now_us
    redis.call('ZADD', KEYS[3], 'NX', string.format('%.0f', arrival), token)
    redis.call('ZADD', KEYS[4], string.format('%.0f', now_ms + place_ms), token)
    -- Both zsets vanish once every waiter has stopped refreshing its place.
    redis.call('PEXPIRE', KEYS[3], place_ms * 2)
    redis.call('PEXPIRE', KEYS[4], place_ms * 2)
end
return {0, redis.call('PTTL', KEYS[1]), arrival}
