//! The lock protocol's Lua scripts. Each runs atomically on the primary of
//! the session's slot and touches only the keys it is handed in `KEYS`; the
//! client steps that call them are in the parent module, and the model
//! checker (`model`) runs these very texts.

use crate::script::LuaScript;

/// Lua that turns `life_value` (the session's own lifetime, see
/// [`crate::lifetime`]: "S<seconds>" or "A<unix ms>", or false) into the
/// data key's expiry: `expire_by` 'EX' (seconds from now) or 'PXAT' (unix
/// ms) and `expire_at`; `default_s` seconds without one. A value this release
/// does not understand counts as none.
macro_rules! expiry_lua {
    () => {
        r"local expire_by, expire_at = 'EX', default_s
if life_value then
  local kind, number = string.match(life_value, '^([SA])(%d+)$')
  if not kind or tonumber(number) == 0 then
    kind = false
  end
  if kind == 'S' then
    expire_at = number
  elseif kind == 'A' then
    expire_by, expire_at = 'PXAT', number
  else
    life_value = false
  end
end
"
    };
}

/// Lua that reads the data into `data` and the session's own lifetime into
/// `life_value` (`data_key` and `life` name their keys). With `refresh` (a
/// TTL in seconds, '0' for none) GETEX renews the data's TTL, by the
/// lifetime when there is one, and the lifetime key's with it. A lifetime
/// without data is a leftover (phpredis's destroy leaves it): it goes, so
/// that an id made again starts afresh. (A fixed end needs no check here:
/// the lifetime key expires at that time.)
macro_rules! read_data_lua {
    () => {
        concat!(
            r"local life_value = redis.call('GET', life)
local default_s = refresh
",
            expiry_lua!(),
            r"local data
if refresh ~= '0' then
  data = redis.call('GETEX', data_key, expire_by, expire_at)
else
  data = redis.call('GET', data_key)
end
if life_value and not data then
  redis.call('DEL', life)
  life_value = false
elseif life_value and refresh ~= '0' then
  redis.call('SET', life, life_value, expire_by, expire_at)
end
"
        )
    };
}

/// Lua that sets `life_value` from `life_arg`, a request's new lifetime (''
/// keeps the stored one, '-' drops it), and the expiry from it.
macro_rules! new_lifetime_lua {
    () => {
        concat!(
            r"local life_value = life_arg
if life_arg == '' then
  life_value = redis.call('GET', life)
elseif life_arg == '-' then
  life_value = false
end
",
            expiry_lua!()
        )
    };
}

/// Lua that gives the lifetime key the data key's expiry once the data is
/// stored or renewed (`exists`), or drops it when the request dropped it.
macro_rules! keep_lifetime_lua {
    () => {
        r"if life_value and exists then
  redis.call('SET', life, life_value, expire_by, expire_at)
elseif life_arg == '-' then
  redis.call('DEL', life)
end
"
    };
}

/// Lua shared by every script that releases a lock: KEYS data, lock, queue,
/// waiters, `next` (the list named after the releaser's secret), done and
/// lifetime, as [`LockKeys`]. Hands the lock to the longest waiter whose deadline has not
/// passed, with that waiter's own lock TTL, and pushes it
/// "F<ms>:<secret>:<done>:" then "1" and the data (or "0": no
/// session) on `next`, the data read and renewed as the acquire script
/// reads it; drops waiters that are gone. The log of savers in `done`,
/// the new holder's fence, lives at least as long as its lock. (The previous release
/// pushed "H<ms>:<secret>:" without `done`.) The waiter's "handed" mark lives as long as the lock it got, so
/// that a waiter behind can tell a dead hand-over for the whole of that
/// time. With nobody waiting it deletes the lock, and the waiters' terms
/// with it in one call: the queue is empty, so all they can hold is the
/// releaser's handed mark and marks of holders that died, whose locks are
/// gone (a mark tells of a dead hand-over only while the lock holds its
/// secret). Inline, not a
/// function: a Lua closure made on every call costs server time.
macro_rules! hand_over_lua {
    () => {
        concat!(
            r"local handed = false
while true do
  local head = redis.call('ZRANGE', queue, '0', '0')[1]
  if not head then break end
  redis.call('ZREM', queue, head)
  local time = redis.call('TIME')
  local now = time[1] * 1000 + math.floor(time[2] / 1000)
  local lock_ms, refresh, deadline =
    string.match(redis.call('HGET', waiters, head) or '', '^(%d+) (%d+) (%d+)$')
  if lock_ms and tonumber(deadline) >= now then
    now = string.format('%d', now)
    redis.call('SET', lock, head, 'PX', lock_ms)
    redis.call('PEXPIRE', done, lock_ms, 'GT')
    redis.call('HSET', waiters, head, 'handed ' .. now .. ' ' .. secret)
    redis.call('PEXPIRE', waiters, lock_ms, 'GT')
",
            read_data_lua!(),
            r"    local writer = redis.call('GET', done) or ''
    redis.call('RPUSH', next, 'F' .. now .. ':' .. head .. ':' .. writer .. ':' .. (data and ('1' .. data) or '0'))
    redis.call('PEXPIRE', next, lock_ms)
    handed = true
    break
  end
  redis.call('HDEL', waiters, head)
end
if handed then
  redis.call('HDEL', waiters, secret)
else
  redis.call('DEL', lock, waiters)
end
"
        )
    };
}

/// The keys every release script declares (`done` and `life` as
/// [`LockKeys`]), and its secret.
macro_rules! release_keys_lua {
    () => {
        r"local data_key, lock, queue, waiters, next = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local done, life, secret = KEYS[6], KEYS[7], ARGV[1]
"
    };
}

/// Lua that drops the caller's heartbeat (`KEYS[8]`, with a lease only) as
/// it lets go: the heartbeat is its own, made when it took the lock or
/// queued (see [`ACQUIRE_AND_READ`]). Last, after the save's writes: a
/// script's first write is the one a primary out of memory refuses, and a
/// `DEL` first would let the `SET` of the data through. (Where a save
/// returns early, the lock no longer names the caller, and its heartbeat
/// expires.)
macro_rules! drop_own_beat_lua {
    () => {
        r"if KEYS[8] then redis.call('DEL', KEYS[8]) end
"
    };
}

/// Lua that logs a save (write, touch or destroy) that landed: the caller's
/// secret goes to the head of `done`, the secrets of the last 8 savers,
/// newest first, space-separated, kept for `done_ms`. The log is the next
/// holder's fence as a whole, and a repeat after a lost reply finds its own
/// secret in it even when up to 7 later saves came since. One key, not one
/// per save: a key per save would fill a hot session's slot with keys a
/// key-by-key migration then has to move one by one. The 7 kept are the
/// log's first 230 bytes, 7 secrets of 32 hex digits and their spaces. Only
/// the oldest entry can be longer (`~<secret>.<time>`, which a log starts
/// with at most, see [`stretch_done_lua`]): it is then cut short, which
/// names nobody. The client read the log under the lock and sends the new
/// one made of it (`new_log`; `secret` alone where it read none, '' when it
/// did not read it or cannot vouch for it): nobody saved since (see
/// `HeldLock::next_log`), and Lua hashes every string it makes byte by
/// byte, so reading and joining the log here cost the primary 9k
/// instructions. With a lease (`retake_ms` given) the log keeps a longer
/// TTL: a queueing or another holder's take stretched it to that holder's
/// `lock_expire`, and a shorter one here would let it vanish under that
/// holder's re-take (see [`retake_lua`]): KEEPTTL, then PEXPIRE GT (4k
/// instructions less than reading the TTL first); a log that expired since
/// the read, which KEEPTTL then made without a TTL, gets `done_ms`. Where
/// the holder read none, one made since (its renewal's `~<secret>`, which a
/// waiter may have stretched) keeps its TTL the same way. Numbers go to
/// `redis.call` as strings: Redis formats a Lua number with `snprintf`.
macro_rules! log_save_lua {
    () => {
        r"if new_log == '' then
  local kept = redis.call('GETRANGE', done, '0', '229')
  new_log = kept == '' and secret or secret .. ' ' .. kept
end
if not retake_ms then
  redis.call('SET', done, new_log, 'PX', done_ms)
elseif new_log ~= secret or not redis.call('SET', done, new_log, 'NX', 'PX', done_ms) then
  redis.call('SET', done, new_log, 'KEEPTTL')
  if redis.call('PEXPIRE', done, done_ms, 'GT') == 0 and redis.call('PTTL', done) == -1 then
    redis.call('PEXPIRE', done, done_ms)
  end
end
"
    };
}

/// A Lua condition: a holder whose lease lapsed takes its lock again in its
/// save. Only with a lease, while the lock is absent (another secret there
/// means another holder), within `lock_expire` of the take (`retake_ms`,
/// the client's count of what is left of it, '0' past it), and only when the
/// log of savers still starts as it did at the read (`retake_fence`, its
/// newest entry then, sent only with a `new_log` of '' (see
/// [`log_save_lua`]); else the second entry in `new_log`, or where the
/// holder read no log, `~<secret>`, which its renewals make): nobody saved
/// since. (With no log known the client sends '0' for `retake_ms`.) Sound because the log never returns to an
/// earlier value past a save: every save puts a fresh secret at its head,
/// and a log is made only by a holder while the lock holds its secret
/// since its read: the acquire script's take, naming it and its run
/// (`~<secret>.<time>`, see [`stretch_done_lua`]), or a renewal making the
/// holder's own fence again ([`RENEW_LEASE`]). So a failover that loses a
/// log, and a save the holder read, cannot have it made again equal to the
/// fence. The acquire script's take and every renewal stretch the log to
/// that holder's `lock_expire`, which later saves of this release keep.
macro_rules! retake_lua {
    () => {
        "(not owner and retake_ms and tonumber(retake_ms) > 0
  and string.match(redis.call('GET', done) or '', '^%S+')
    == (retake_fence or string.match(new_log, '^%S+ (%S+)') or '~' .. secret))"
    };
}

/// Lua that makes the log of savers `done` last at least `cap_ms` (the
/// taker's `lock_expire`), so that a re-take's fence cannot expire into
/// "nobody saved" (see [`retake_lua`]). Where there is no log yet it makes
/// one that names the taker and this run of the script, `~<secret>.<server
/// time>` (a call repeated after a lost reply, once the log vanished, makes
/// another): no saver's secret, it is carried as the oldest entry until 8
/// saves push it out. No `:` in it: a hand-over's push is split on `:`. Only a take makes it (the
/// lock is then ours, so no holder read the log before), never a waiter: to
/// a holder that read no log, any of this and earlier releases, it would
/// read as a save.
macro_rules! stretch_done_lua {
    () => {
        r"if redis.call('PEXPIRE', done, cap_ms, 'GT') == 0 and redis.call('EXISTS', done) == 0 then
    local time = redis.call('TIME')
    redis.call('SET', done, '~' .. secret .. '.' .. time[1] .. time[2], 'PX', cap_ms)
  end
"
    };
}

/// A Lua condition: the caller's save is in the log of [`log_save_lua`].
macro_rules! save_logged_lua {
    () => {
        "string.find(' ' .. (redis.call('GET', done) or '') .. ' ', ' ' .. secret .. ' ', 1, true)"
    };
}

/// KEYS: data, lock, queue, waiters, the list this caller waits on (named
/// after the one ahead of it), the list the suspect's hand-over went to, done,
/// lifetime; with a lease, the caller's heartbeat (`<lock>_BEAT_<secret>`),
/// which a take makes and a queueing makes to last through the wait and the
/// hand-over, both at '0': the caller's renewals move it once it holds the
/// lock (see `lock::heartbeat`). No other call makes one, so an older
/// release's holder, or one without a lease, never has one.
/// ARGV: secret, lock TTL ms, data TTL s (0: plain GET), '1' to read the data
/// even when busy, how long the caller will wait in ms (0: it will not, leave
/// the queue), the hand-over timeout in ms, the owner suspected of a dead
/// hand-over (or ''), '1' if the caller queued before, `max_waiters`, '1' to
/// read the data when refused; with a lease only (the lock TTL is then
/// `lock_expire` and a lease, the backstop): the backstop in ms, to which
/// the log of savers is stretched by a take or a queueing (a hand-over that
/// late carries it as the fence), and the TTL a hand-over gives the caller
/// (the backstop too).
/// Returns {1, data, the last writer's secret, the session's lifetime} when the lock is ours; {0, data-or-false, owner, the one
/// ahead of us, who handed the owner the lock} when busy. Repeats are safe: a
/// lock that already holds our secret is ours (a lost reply, or a hand-over
/// that came after our wait ended), and queueing again keeps our place.
pub(crate) static ACQUIRE_AND_READ: LuaScript = LuaScript::new(concat!(
    r"local data_key, lock, queue, waiters = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local wait_list, suspect_list, done, life = KEYS[5], KEYS[6], KEYS[7], KEYS[8]
local secret, lock_ms, refresh = ARGV[1], ARGV[2], ARGV[3]
local read_if_busy, wait_ms, hand_over_ms = ARGV[4] == '1', tonumber(ARGV[5]), tonumber(ARGV[6])
local suspect, queued = ARGV[7], ARGV[8] == '1'
local max_waiters, read_if_rejected = tonumber(ARGV[9]), ARGV[10] == '1'
local cap_ms, handed_ms = ARGV[11], ARGV[12] or lock_ms
local beat = KEYS[9]
local owner = redis.call('GET', lock)
-- A lock this thread took earlier (the first half of the secret names the
-- thread) and has let go of: its release was lost or undone by a failover.
if owner and owner ~= secret and string.sub(owner, 1, 16) == string.sub(secret, 1, 16) then
  owner = false
end
-- A hand-over whose data still lies in its list after hand_over_ms, to a
-- waiter still marked as handed, was never taken: that waiter is gone, the
-- lock is free. (A waiter that took its lock by this script dropped its mark,
-- and one that popped the data left nothing in the list.)
if owner and owner ~= secret and owner == suspect
  and string.match(redis.call('HGET', waiters, suspect) or '', '^handed ') then
  local pushed = redis.call('LINDEX', suspect_list, 0)
  local at, target = string.match(pushed or '', '^[HF](%d+):(%x+):')
  if target == suspect then
    local time = redis.call('TIME')
    if time[1] * 1000 + math.floor(time[2] / 1000) - tonumber(at) > hand_over_ms then
      redis.call('DEL', suspect_list)
      redis.call('HDEL', waiters, suspect)
      owner = false
    end
  end
end
if not owner or owner == secret then
  -- Ours. Our handed mark goes even when we did not know we had queued (a
  -- lost reply): nobody may suspect us now. A push meant for us that we did
  -- not pop goes with our list.
  redis.call('SET', lock, secret, 'PX', lock_ms)
  if beat then redis.call('SET', beat, '0', 'PX', lock_ms) end
  -- The log of savers is our fence: it lives as long as our lock, or with
  -- a lease as long as we may re-take it.
  if cap_ms then
  ",
    stretch_done_lua!(),
    r"  else
    redis.call('PEXPIRE', done, lock_ms, 'GT')
  end
  redis.call('HDEL', waiters, secret)
  if queued then
    redis.call('ZREM', queue, secret)
    redis.call('DEL', wait_list)
  end
",
    read_data_lua!(),
    r"  return {1, data, redis.call('GET', done), life_value}
end
local data, ahead = false, false
-- A cap on waiters: one more does not queue (one already queued keeps its place).
if wait_ms > 0 and max_waiters > 0 and not redis.call('ZSCORE', queue, secret) then
  local waiting = redis.call('ZCARD', queue)
  if waiting >= max_waiters then
    if read_if_rejected then data = redis.call('GET', data_key) end
    if beat then redis.call('DEL', beat) end
    return {2, data, waiting}
  end
end
if wait_ms > 0 then
  -- Queue by arrival (NX keeps our place across attempts) with our terms
  -- and how long we are sure to be waiting. Both keys expire on their own
  -- once every waiter is gone, and no waiter shortens another's expiry.
  local time = redis.call('TIME')
  local now = time[1] * 1000 + math.floor(time[2] / 1000)
  redis.call('ZADD', queue, 'NX', time[1] .. string.format('%06d', time[2]), secret)
  redis.call('HSET', waiters, secret,
    handed_ms .. ' ' .. refresh .. ' ' .. string.format('%d', now + wait_ms + hand_over_ms))
  local expiry = wait_ms + 2 * hand_over_ms
  for _, key in ipairs({queue, waiters}) do
    redis.call('PEXPIRE', key, expiry, 'NX')
    redis.call('PEXPIRE', key, expiry, 'GT')
  end
  -- A hand-over gives us the lock without us: our heartbeat is there first.
  if beat then redis.call('SET', beat, '0', 'PX', expiry + tonumber(handed_ms)) end
  -- We wait on the list of the one ahead of us: it pushes there when it releases.
  local rank = redis.call('ZRANK', queue, secret)
  -- With a lease, waiters ahead whose wait has ended leave the queue (a live
  -- one renews its deadline every piece: these died, and a hand-over would
  -- pass them over), so that the first live one is next in line and watches
  -- the holder's heartbeat.
  if cap_ms and rank > 0 then
    for _, other in ipairs(redis.call('ZRANGE', queue, '0', rank - 1)) do
      local ends = string.match(redis.call('HGET', waiters, other) or '', '^%d+ %d+ (%d+)$')
      if not ends or tonumber(ends) < now then
        redis.call('ZREM', queue, other)
        redis.call('HDEL', waiters, other)
      end
    end
    rank = redis.call('ZRANK', queue, secret)
  end
  ahead = owner
  if rank > 0 then ahead = redis.call('ZRANGE', queue, rank - 1, rank - 1)[1] end
  -- A hand-over carries the log as our fence: it must outlast our lease.
  -- None is made where there is none: to the holder, which read none, it
  -- would read as a save.
  if cap_ms then
    redis.call('PEXPIRE', done, cap_ms, 'GT')
  end
elseif queued then
  redis.call('ZREM', queue, secret)
  redis.call('HDEL', waiters, secret)
end
-- Leaving (its wait is over): its heartbeat, made when it queued, goes.
if wait_ms == 0 and beat then redis.call('DEL', beat) end
if read_if_busy then data = redis.call('GET', data_key) end
local handed_by = string.match(redis.call('HGET', waiters, owner) or '', '^handed %d+ (%x+)$')
return {0, data, owner, ahead, handed_by or false}",
));

/// KEYS: data, lock, queue, waiters, next, done, lifetime; with a lease, the
/// caller's heartbeat, which goes (see `drop_own_beat_lua`). ARGV: secret,
/// data, data TTL s, the log's TTL ms (`lock_expire`), fence, the request's
/// new lifetime ('' keeps the stored one, '-' drops it), the new log of
/// savers (see [`log_save_lua`]); with a lease only, for a re-take
/// ([`retake_lua`]), what is left of `lock_expire` in ms, and its fence
/// where `new_log` is ''. Stores (for the session's lifetime)
/// and releases only while the lock holds the secret: 1 if it did ({1, the
/// lifetime} when it stored one), 0 if the lock was lost. The store logs
/// the secret in `done` for the lock's TTL, so that a repeat after a lost
/// reply, which finds the lock gone or handed on, knows that its own write
/// landed (equal bytes would not tell it from another holder's). The fence is
/// what `done` held when the data was read ('' for nothing): if another save
/// came since (a failover can hand a lock back to a holder whose take it
/// undid), nothing is stored and the lock is released anyway. A fence of '?'
/// (not known) checks nothing. The log `~<secret>` is this holder's own,
/// which its renewals make where it read none ([`RENEW_LEASE`]): no save.
pub(crate) static WRITE_AND_RELEASE: LuaScript = LuaScript::new(concat!(
    release_keys_lua!(),
    r"local data, default_s, lock_ms, fence, life_arg = ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6]
local new_log, retake_ms, retake_fence = ARGV[7], ARGV[8], ARGV[9]
local owner = redis.call('GET', lock)
if owner ~= secret then
  if ",
    save_logged_lua!(),
    r" then
    local kept = redis.call('GET', life)
    return kept and {1, kept} or 1
  end
  if not ",
    retake_lua!(),
    r" then return 0 end
end
-- An unknown fence (a plain take's) compares nothing, so reads no log.
local stale = false
if fence ~= '?' then
  local savers = redis.call('GET', done) or ''
  stale = savers ~= fence and savers ~= '~' .. secret
end
local applied_life = false
if not stale then
",
    new_lifetime_lua!(),
    r"redis.call('SET', data_key, data, expire_by, expire_at)
local exists = true
",
    keep_lifetime_lua!(),
    r"applied_life = life_value
local done_ms = lock_ms
",
    log_save_lua!(),
    r"end
",
    hand_over_lua!(),
    drop_own_beat_lua!(),
    "if stale then return 0 end
return applied_life and {1, applied_life} or 1"
));

/// KEYS as [`WRITE_AND_RELEASE`]. ARGV: secret, data, data TTL s, the
/// request's new lifetime as for [`WRITE_AND_RELEASE`], the log's TTL ms,
/// the new log of savers; with a lease only, as [`WRITE_AND_RELEASE`]'s
/// last two.
/// Renews the TTL for the session's lifetime (allowed without the lock, as in
/// phpredis, which then keeps the stored lifetime); applies the new
/// lifetime, rewrites a vanished key and releases the lock only while it
/// holds the secret: 1 if it did ({1, the lifetime} with one), 0 if not. It
/// logs itself in `done` as a write does.
pub(crate) static TOUCH_AND_RELEASE: LuaScript = LuaScript::new(concat!(
    release_keys_lua!(),
    r"local data, default_s, life_arg = ARGV[2], ARGV[3], ARGV[4]
local new_log, retake_ms, retake_fence = ARGV[6], ARGV[7], ARGV[8]
local owner = redis.call('GET', lock)
local held = owner == secret
local repeated = not held and ",
    save_logged_lua!(),
    r"
if not held and not repeated and ",
    retake_lua!(),
    r" then held = true end
if not held then life_arg = '' end
",
    new_lifetime_lua!(),
    r"local exists = redis.call(expire_by == 'EX' and 'EXPIRE' or 'PEXPIREAT', data_key, expire_at) == 1
if not exists and held then
  redis.call('SET', data_key, data, expire_by, expire_at)
  exists = true
end
",
    keep_lifetime_lua!(),
    r"if repeated then return life_value and {1, life_value} or 1 end
if not held then return 0 end
local done_ms = ARGV[5]
",
    log_save_lua!(),
    hand_over_lua!(),
    drop_own_beat_lua!(),
    "return life_value and {1, life_value} or 1"
));

/// KEYS as [`WRITE_AND_RELEASE`]. ARGV: secret, the log's TTL ms, the new
/// log of savers; with a lease only, as [`WRITE_AND_RELEASE`]'s last two. Deletes the
/// data and its lifetime and releases the lock only while it holds the
/// secret: 1 if it did ({1, the lifetime it had} with one), 0 if the lock was
/// lost (an expired lock may have gone to another holder, whose data must
/// stay). Logs itself in `done` as a write does.
pub(crate) static DESTROY_AND_RELEASE: LuaScript = LuaScript::new(concat!(
    release_keys_lua!(),
    r"local new_log, retake_ms, retake_fence = ARGV[3], ARGV[4], ARGV[5]
local owner = redis.call('GET', lock)
if owner ~= secret then
  if ",
    save_logged_lua!(),
    r" then return 1 end
  if not ",
    retake_lua!(),
    r" then return 0 end
end
local life_value = redis.call('GET', life)
redis.call('DEL', data_key, life)
local done_ms = ARGV[2]
",
    log_save_lua!(),
    hand_over_lua!(),
    drop_own_beat_lua!(),
    "return life_value and {1, life_value} or 1"
));

/// KEYS as [`WRITE_AND_RELEASE`]. ARGV: secret.
/// Releases the lock if ours (1); else leaves the queue, where a failed wait may have left us, and
/// hands on a lock that was released without a hand-over (DELEX, DELIFEQ,
/// an older release of this extension) while others wait (0).
pub(crate) static RELEASE: LuaScript = LuaScript::new(concat!(
    release_keys_lua!(),
    r"local owner = redis.call('GET', lock)
local ours = owner == secret
if not ours then
  redis.call('ZREM', queue, secret)
  redis.call('HDEL', waiters, secret)
  if owner then
    ",
    drop_own_beat_lua!(),
    r"    return 0
  end
end
",
    hand_over_lua!(),
    drop_own_beat_lua!(),
    "if ours then return 1 end
return 0"
));

/// KEYS: data, lifetime. ARGV: data TTL s. The data and the session's own
/// lifetime without a lock, both renewed by that lifetime (the TTL without
/// one), as the acquire script reads them: {data, lifetime}. A lifetime key
/// left without data goes.
pub(crate) static READ_AND_RENEW: LuaScript = LuaScript::new(concat!(
    "local data_key, life, refresh = KEYS[1], KEYS[2], ARGV[1]\n",
    read_data_lua!(),
    "return {data, life_value}"
));

/// The watchdog's renewal of a lease: it moves the holder's heartbeat.
/// KEYS: the lock, the holder's heartbeat; the log of savers `done` when the
/// holder has a fence for a re-take. ARGV: the holder's secret, the
/// heartbeat's new value (a number the holder never sent before), its TTL in
/// ms (what is left of the lock's backstop); with `done`, what is left of
/// `lock_expire` in ms and the fence. Returns 1 if the lock held the secret
/// and the heartbeat moved, 0 if not: a lock that was broken, went to another
/// holder or was released is never touched, nor its log. The lock keeps the
/// TTL its take gave it, `lock_expire` and a lease: a primary's clock that
/// runs while it serves nobody takes nothing from a live holder (see
/// `lock::heartbeat`). While the lock holds the secret, the log lasts until
/// `lock_expire`, as the fence a re-take finds ([`retake_lua`]): where it is
/// gone (expired before the first renewal, or none was read: the fence is
/// then `~<secret>`) the fence is made again. Sound because the lock held
/// this secret since the read, so nobody saved since and the fence still
/// tells who saved last; a holder that read no log is about only with a
/// lock it lost to this one. The lock can hold the secret again after a
/// save only when a failover brought back the holder's queue entry and a
/// later release handed it the lock: that save made a log, and the
/// hand-over and the renewals stretch it to the lock's TTL, so it is never
/// gone to be made again (and the holder's write then fails its fence). (A
/// plain take, which runs no script, leaves this to the renewals.)
pub(crate) static RENEW_LEASE: LuaScript = LuaScript::new(
    r"if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
-- PEXPIRE first, which a primary out of memory allows: the SET after it
-- then goes through, as a break at the limit does.
redis.call('PEXPIRE', KEYS[2], ARGV[3])
redis.call('SET', KEYS[2], ARGV[2], 'PX', ARGV[3])
if KEYS[3] and redis.call('PEXPIRE', KEYS[3], ARGV[4], 'GT') == 0
  and redis.call('EXISTS', KEYS[3]) == 0 then
  redis.call('SET', KEYS[3], ARGV[5], 'PX', ARGV[4])
end
return 1",
);

/// A waiter breaks a lock whose holder's heartbeat stood still through a
/// whole chain of its observations (see `lock::heartbeat`). KEYS as
/// [`WRITE_AND_RELEASE`]'s for the holder: data, lock, queue, waiters, the
/// holder's `next` list, done, lifetime, the holder's heartbeat. ARGV: the
/// holder's secret, the heartbeat as the waiter saw it. A compare-and-set:
/// only while the lock holds that secret and the heartbeat that value does
/// it drop the heartbeat and hand the lock on as the holder's release would
/// (to the longest waiter still waiting, or to nobody). Returns 1 if it
/// broke the lock, 0 if not. The holder's save then finds another secret
/// (or none, and a log that names a later save or a fence it still
/// matches: nobody saved) and stores nothing; its renewals find the lock
/// lost. Safe to repeat: the heartbeat is gone after the first.
pub(crate) static BREAK_LOCK: LuaScript = LuaScript::new(concat!(
    release_keys_lua!(),
    r"local beat, seen = KEYS[8], ARGV[2]
if redis.call('GET', lock) ~= secret or redis.call('GET', beat) ~= seen then return 0 end
",
    hand_over_lua!(),
    "redis.call('DEL', beat)
return 1"
));

/// Every script of the protocol, for tests that check them all.
#[cfg(test)]
pub(crate) const SCRIPTS: [&LuaScript; 6] = [
    &ACQUIRE_AND_READ,
    &WRITE_AND_RELEASE,
    &TOUCH_AND_RELEASE,
    &DESTROY_AND_RELEASE,
    &RELEASE,
    &BREAK_LOCK,
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_script_builds_a_key_name() {
        for script in SCRIPTS {
            let source = script.source();
            for derived in ["_LOCK", "_FIFO", "_WAITERS", "_WAKE", "_QUEUE", ".. '_"] {
                assert!(!source.contains(derived), "{derived} in {source}");
            }
            assert!(source.contains("KEYS[2]"), "the lock key is declared");
        }
    }

    #[test]
    fn release_scripts_share_the_hand_over() {
        for script in [
            &WRITE_AND_RELEASE,
            &TOUCH_AND_RELEASE,
            &DESTROY_AND_RELEASE,
            &RELEASE,
            &BREAK_LOCK,
        ] {
            assert!(script.source().contains(hand_over_lua!()));
        }
    }
}
