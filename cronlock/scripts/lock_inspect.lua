-- lock_inspect: read who holds a lock, atomically (for operators; changes nothing).
--
-- KEYS[1] lock key
-- KEYS[2] meta key
--
-- Reply: {} when the lock is free; else {token, pttl_ms, holder, since_ms, fence}
-- (holder, since_ms and fence are false when the meta hash does not describe this
-- token, e.g. a key written by something other than cronlock).

local token = redis.call('GET', KEYS[1])
if not token then
    return {}
end
local pttl = redis.call('PTTL', KEYS[1])
local meta = redis.call('HMGET', KEYS[2], 'token', 'holder', 'since', 'fence')
if meta[1] ~= token then
    return {token, pttl, false, false, false}
end
return {token, pttl, meta[2], meta[3], meta[4]}
