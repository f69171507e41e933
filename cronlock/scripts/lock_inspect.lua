-- lock_inspect: read who holds a lock, atomically (for operators; changes nothing).
--
-- KEYS[1] lock key
-- KEYS[2] fence key  (string "fence since_us token holder", written by lock_acquire)
--
-- Reply: {} when the lock is free; else {token, pttl_ms, holder, since_us, fence}
-- (holder, since_us and fence are false when the fence key does not describe this
-- token, e.g. a key written by something other than cronlock).

local token = redis.call('GET', KEYS[1])
if not token then
    return {}
end
local pttl = redis.call('PTTL', KEYS[1])
local info = redis.call('GET', KEYS[2])
if info then
    local fence, since, owner, holder = string.match(info, '^(%d+) (%d+) (%S+) (.*)$')
    if owner == token then
        return {token, pttl, holder, since, fence}
    end
end
return {token, pttl, false, false, false}
