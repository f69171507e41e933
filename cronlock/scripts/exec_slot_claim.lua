-- exec_slot_claim: claim one occurrence of a cron expression for `cronlock exec --slot`.
--
-- The claimer must hold the lock of the same key (checked here, in the same script), and
-- the claim succeeds only if no run claimed this occurrence or a later one: every host
-- whose crontab fires the same line runs the command at most once per occurrence, and a
-- host whose clock runs late cannot revive an older one.
--
-- KEYS[1] slot record  P:slot:{K}  (string: epoch ms of the latest claimed occurrence)
-- KEYS[2] lock key     P:lock:{K}  (string: the holder's token)
-- ARGV[1] token        the claimer's lock token
-- ARGV[2] occurrence   epoch ms of the occurrence to claim
-- ARGV[3] record_ms    PX of the record after a claim (how long it refuses older ones)
--
-- Reply:
--   {'claimed', previous}  claimed; previous is the occurrence claimed before ('' if none)
--   {'done', stored}       this occurrence was already claimed
--   {'stale', stored}      a later occurrence was already claimed
--   {'lost'}               the lock is not the claimer's (expired or taken)
--   {'corrupt', what}      the record holds something cronlock did not write
-- Only 'claimed' writes anything.

if redis.call('GET', KEYS[2]) ~= ARGV[1] then
    return {'lost'}
end
local kind = redis.call('TYPE', KEYS[1])['ok']
if kind ~= 'string' and kind ~= 'none' then
    return {'corrupt', kind}
end
local value = redis.call('GET', KEYS[1])
if value then
    local stored = tonumber(value)
    if not stored then
        return {'corrupt', value}
    end
    local occurrence = tonumber(ARGV[2])
    if stored == occurrence then
        return {'done', value}
    end
    if stored > occurrence then
        return {'stale', value}
    end
end
redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
return {'claimed', value or ''}
