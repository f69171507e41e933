-- lock_acquire: try to take a lock in one round trip, joining the wait queue on a loss.
--
-- KEYS[1] lock key         (string: the holder's token, PX = ttl)
-- KEYS[2] fence key        (string "fence since_us token holder"; PX = ttl + grace)
-- KEYS[3] queue key        (zset: waiting tokens scored by arrival, microseconds)
-- KEYS[4] queue expiry key (zset: waiting tokens scored by when their place lapses, ms)
-- KEYS[5] wake key         (list: this acquirer's wake-up signal; deleted on a win)
--                          only when waiting (place_ms > 0)
-- ARGV[1] token            random, unique per acquire
-- ARGV[2] ttl_ms           lock lifetime in milliseconds
-- ARGV[3] holder           "host:pid", for operators (cronlock.inspect)
-- ARGV[4] grace_ms         how long the fence key outlives the lock
-- ARGV[5] place_ms         absent or 0: do not wait; > 0: wait, keeping the queue place
--                          this long
-- ARGV[6] arrival_us       "" on the first try; then the arrival the previous reply gave
--                          (only when waiting)
--
-- Reply:
--   {1, fence}                   won; fence is the fencing token (strictly increasing),
--                                as a decimal string
--   {0, pttl_ms, arrival_us}     lost; pttl_ms of the holder's lock (-2: free, but an
--                                earlier waiter goes first); arrival_us is this waiter's
--                                place (0 when not waiting)
--
-- Fencing: fence = max(previous fence + 1, Redis TIME in microseconds). The previous
-- fence is the first field of the fence key, which expires grace_ms after the lock, so
-- memory stays bounded per key. The win writes TIME with SET ... GET (one call) and only
-- in the rare case that the previous fence is not below it (two wins within one
-- microsecond, or the server clock stepped back) writes previous + 1 instead. After the
-- fence key has expired, TIME alone keeps tokens increasing as long as the Redis
-- server's clock does not step back by more than grace_ms. (Lua numbers are doubles:
-- tokens are exact integers below 2^53, i.e. microseconds until the year 2255.)
--
-- Fast path (nobody queued, the common case): EXISTS queue, SET NX PX, TIME, SET GET.

local function won()
    local t = redis.call('TIME')
    local now = t[1] .. string.sub('00000' .. t[2], -6)  -- TIME in microseconds
    local tail = ' ' .. now .. ' ' .. ARGV[1] .. ' ' .. ARGV[3]
    local px = tonumber(ARGV[2]) + tonumber(ARGV[4])
    local previous = redis.call('SET', KEYS[2], now .. tail, 'PX', px, 'GET')
    if previous then
        local space = string.find(previous, ' ', 1, true) or 0
        local stored = tonumber(string.sub(previous, 1, space - 1))
        if stored and stored >= tonumber(now) then
            local fence = string.format('%.0f', stored + 1)
            redis.call('SET', KEYS[2], fence .. tail, 'PX', px)
            return {1, fence}
        end
    end
    return {1, now}
end

local token = ARGV[1]
local place_ms = tonumber(ARGV[5] or '0')

if redis.call('EXISTS', KEYS[3]) == 0 then
    -- Nobody waits: a free lock goes to whoever asks.
    if redis.call('SET', KEYS[1], token, 'NX', 'PX', ARGV[2]) then
        if place_ms > 0 then
            redis.call('DEL', KEYS[5])
        end
        return won()
    end
else
    -- Forget waiters whose place lapsed (they died or gave up without saying so), then
    -- serve the queue's head first.
    local t = redis.call('TIME')
    local now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
    local expired = redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', now_ms, 'LIMIT', 0, 100)
    if #expired > 0 then
        redis.call('ZREM', KEYS[3], unpack(expired))
        redis.call('ZREM', KEYS[4], unpack(expired))
    end
    local head = redis.call('ZRANGE', KEYS[3], 0, 0)
    if (head[1] == nil or head[1] == token)
        and redis.call('SET', KEYS[1], token, 'NX', 'PX', ARGV[2]) then
        if place_ms > 0 then
            redis.call('ZREM', KEYS[3], token)
            redis.call('ZREM', KEYS[4], token)
            redis.call('DEL', KEYS[5])
        end
        return won()
    end
end

local arrival = 0
if place_ms > 0 then
    local t = redis.call('TIME')
    local now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])
    local now_ms = math.floor(now_us / 1000)
    arrival = tonumber(ARGV[6]) or now_us
    redis.call('ZADD', KEYS[3], 'NX', string.format('%.0f', arrival), token)
    redis.call('ZADD', KEYS[4], string.format('%.0f', now_ms + place_ms), token)
    -- Both zsets vanish once every waiter has stopped refreshing its place.
    redis.call('PEXPIRE', KEYS[3], place_ms * 2)
    redis.call('PEXPIRE', KEYS[4], place_ms * 2)
end
return {0, redis.call('PTTL', KEYS[1]), arrival}
