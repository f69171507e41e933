-- lock_extend: compare-and-PEXPIRE a lock by token (renewal and extend()).
--
-- KEYS[1] lock key
-- KEYS[2] fence key  (its expiry follows the lock's, plus the grace)
-- ARGV[1] token
-- ARGV[2] ttl_ms     the lock's new lifetime, counted from now
-- ARGV[3] grace_ms   how long the fence key outlives the lock
--
-- Reply: 1 if the lock was ours and now lives ttl_ms more; 0 if it was not ours
-- (expired or taken: nothing is changed).

if redis.call('GET', KEYS[1]) ~= ARGV[1] then
    return 0
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
redis.call('PEXPIRE', KEYS[2], tonumber(ARGV[2]) + tonumber(ARGV[3]))
return 1
