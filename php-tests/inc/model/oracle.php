<?php
// The oracle of 057-model-based.phpt: what PHP's session module and the rules
// of docs/configuration.md and docs/locking.md say a request prints and leaves in the store. It is the specification
// the generated sequences are checked against.
//
// The store holds, for each id label, the versions it may be in: what is
// stored is exact, but a TTL is only known within the time window of the
// request that set it, and where a rule allows two outcomes (an early_refresh
// read may or may not renew the TTL; after regenerate(false) the old id may or
// may not take the lifetime asked for before) each is a version. Checking the
// store keeps the versions that match what is there.
//
// A version: ['data' => ?array (null: no key), 'life' => ?LIFE, 'exp' => ?[lo, hi]]
// with LIFE ['slide', seconds] or ['fixed', lo, hi] (a fixed end, unix
// seconds), and exp when the data key expires (unix seconds), null without data.

/** $data as PHP's default serializer ("php") encodes it. */
function model_encode(array $data): string {
    $encoded = '';
    foreach ($data as $key => $value) $encoded .= $key . '|' . serialize($value);
    return $encoded;
}

/** How a request's step is shown in its output. */
function model_step_name(array $step): string {
    return match ($step[0]) {
        'start' => 'start(' . match ($step[1]) { '-' => '', '' => "''", default => $step[1] } . ($step[2] ? ', read_and_close' : '') . ')',
        'set' => "$step[1]=" . json_encode($step[2]),
        'unset' => "unset $step[1]",
        'close' => 'write_close()',
        'abort' => 'abort()',
        'reset' => 'reset()',
        'destroy' => 'destroy()',
        'regen' => 'regenerate_id(' . json_encode($step[1]) . ')',
        'lifetime' => "set_lifetime($step[1], " . json_encode($step[2]) . ')',
        'fork' => "fork($step[1])",
    };
}

/** What PHP adds to a warning of a failed write, the save_path aside. */
const MODEL_WRITE_FAILED = 'Failed to write session data (rediscluster). Please verify that the current setting of session.save_path is correct (*)';
/** Why a child forked from the lock's holder is refused a save or a destroy. */
const MODEL_FORKED = 'its lock belongs to the process this one was forked from (pcntl_fork()), which saves the session; nothing was stored';
/** Why a session served read only in an outage is refused a write or a destroy. */
const MODEL_READ_ONLY = 'the session is read only (its primary could not serve it at session_start(), failover=error)';

/** The exit status of each way a request ends. */
const MODEL_EXIT = ['end' => 0, 'exit' => 3, 'throw' => 255, 'fatal' => 255];

final class ModelOracle {
    /** @var array<string, list<array>> label => versions */
    public array $store = [];
    /** Labels of the ids PHP generated so far: g1, g2, … */
    public int $generated = 0;
    /** The id the last request ended with (its cookie, which the next request may send). */
    public ?string $cookie = null;

    // The request being run: its INI, time window, session status, session_id()
    // (null: none), $_SESSION (null: never started), $_SESSION as read, the
    // lifetime asked for and not applied yet: ['id' => label, 'lives' =>
    // list<?LIFE>] (null: drop it), whether the primary of its ids is frozen
    // (an outage) and whether the session is served read only.
    private array $ini;
    private array $window;
    private bool $active;
    private ?string $id;
    private ?array $session;
    private ?array $read;
    private ?array $pending;
    private bool $outage;
    private bool $read_only;
    private array $out;

    public function __construct(private bool $strict, private bool $locking) {
        foreach (MODEL_IDS as $label) $this->store[$label] = [self::ABSENT];
    }

    private const ABSENT = ['data' => null, 'life' => null, 'exp' => null];

    /** The lines a request prints, given the time window [t0, t1] it ran in; the store as it leaves it. */
    public function request(array $request, array $window): array {
        $this->ini = $request['ini'];
        $this->window = $window;
        $this->active = $this->read_only = false;
        $this->outage = !empty($request['outage']);
        $this->id = $this->session = $this->read = $this->pending = null;
        $this->out = [];
        foreach ($request['steps'] as $step) {
            $result = $this->step($step);
            if ($this->id !== null) $this->cookie = $this->id;
            $this->out[] = model_step_name($step) . ' => ' . json_encode($result) . ' | '
                . ($this->active ? 'active' : 'none') . ' ' . ($this->id ?? '-') . ' | ' . json_encode($this->session);
        }
        $this->out[] = "end $request[end]";
        // PHP writes an active session at the request's end, also after exit(),
        // an uncaught exception or a fatal error.
        if ($this->active) $this->save();
        $this->out[] = 'exit ' . MODEL_EXIT[$request['end']];
        return $this->out;
    }

    private function step(array $step) {
        switch ($step[0]) {
            case 'start':
                [, $label, $read_and_close] = $step;
                if ($label === 'cookie') $label = $this->cookie ?? '';
                if ($label !== '-') $this->id = $label === '' ? null : $label;
                // No id, or in strict mode one the store does not have: PHP makes a new one.
                if ($this->id === null || ($this->strict && $this->data($this->id) === null)) $this->id = $this->newId();
                // In an outage it is read from a replica (a new id: empty), and read only.
                $this->read_only = $this->outage;
                if ($this->outage) $this->out[] = 'warning: Session sha256:* is read only: its primary could not serve it (*), so it was read from a replica (failover=error)';
                $this->read();
                $this->active = !$read_and_close;   // read_and_close: closed without a write
                return true;
            case 'set':
                $this->session[$step[1]] = $step[2];
                return null;
            case 'unset':
                unset($this->session[$step[1]]);
                return null;
            case 'close':   // true, whether the write was refused or not
                $this->save();
                $this->active = false;
                return true;
            case 'abort':   // stores nothing, and discards a lifetime asked for
                $this->active = false;
                $this->pending = null;
                return true;
            case 'reset':   // $_SESSION as stored; PHP validates the id again in strict mode
                if ($this->strict && $this->data($this->id) === null) {
                    $this->id = $this->newId();
                    // The same session under PHP's new id: whether a lifetime asked for follows is not said: either.
                    if ($this->pending) $this->pending = ['id' => $this->id, 'lives' => array_unique([...$this->pending['lives'], null], SORT_REGULAR)];
                }
                $this->read();
                return true;
            case 'destroy':   // the data and its lifetime, asked for or stored; session_id() is '' then, refused or not
                if ($this->read_only) {
                    array_push($this->out, 'warning: Unable to destroy session: ' . MODEL_READ_ONLY, 'warning: Session object destruction failed');
                } else {
                    $this->store[$this->id] = [self::ABSENT];
                }
                $this->active = false;
                $this->id = $this->pending = null;
                return !$this->read_only;
            case 'regen':
                // The new id carries the lifetime, asked for or stored, to its write.
                $old = $this->id;
                $carried = $this->pending['lives'] ?? $this->lives($old);
                if ($step[1]) {
                    $this->store[$old] = [self::ABSENT];
                } else {
                    // The old id keeps the data as it is now; whether a lifetime
                    // asked for applies to it too is not said: either.
                    $this->store[$old] = $this->written(array_unique(array_merge($this->lives($old), $carried), SORT_REGULAR));
                }
                $this->id = $this->newId();
                $this->pending = ['id' => $this->id, 'lives' => $carried];
                $this->read = null;
                return true;
            case 'lifetime':
                [, $seconds, $sliding] = $step;
                if (!$this->active) {
                    $this->out[] = 'warning: no active session of the rediscluster save handler';
                    return false;
                }
                if ($seconds < 0) {
                    $this->out[] = 'warning: a session lifetime cannot be negative';
                    return false;
                }
                if ($this->read_only) {
                    $this->out[] = 'warning: the session is read only: nothing of it will be saved in this request';
                    return false;
                }
                $life = $seconds === 0 ? null : ($sliding ? ['slide', $seconds] : ['fixed', $this->window[0] + $seconds, $this->window[1] + $seconds]);
                $this->pending = ['id' => $this->id, 'lives' => [$life]];
                return true;
            case 'fork':
                $this->fork($step[1]);
                return true;
        }
    }

    /**
     * pcntl_fork(): the child does $what and exits, PHP's end saving what is
     * still active; its lines come out before the parent goes on. With
     * locking the lock is the parent's: the child's write or destroy is
     * refused (an unchanged session with lazy_write is let go of), and the
     * store stays as it was. Without, the child saves as any request does,
     * and the parent's $_SESSION and lifetime asked for stay its own.
     */
    private function fork(string $what): void {
        $parent = [$this->session, $this->pending, $this->out];
        $this->out = [];
        if ($what === 'change') $this->session['k1'] = 'child';
        if ($what === 'destroy') {
            // Generated only with locking.
            array_push($this->out, 'warning: Unable to destroy session: ' . MODEL_FORKED, 'warning: Session object destruction failed');
        } elseif (!$this->locking) {
            $this->save();
        } elseif (!$this->touches()) {
            array_push($this->out, 'warning: Unable to write session: ' . MODEL_FORKED, 'warning: ' . MODEL_WRITE_FAILED);
        }
        $child = array_map(fn($line) => "child: $line", $this->out);
        [$this->session, $this->pending, $this->out] = $parent;
        array_push($this->out, ...$child);
    }

    /**
     * Whether PHP's save of the active session is a touch: lazy_write and
     * $_SESSION as read, not empty (an empty one is always written), and not
     * since session_regenerate_id() (which forgets what was read).
     */
    private function touches(): bool {
        return $this->ini['session.lazy_write'] && $this->session !== [] && $this->read !== null
            && model_encode($this->session) === model_encode($this->read);
    }

    /**
     * PHP's save of the active session: a write, or with lazy_write and
     * $_SESSION as read a touch. A touch keeps the data stored (a forked
     * child may have written since, without a lock) unless it changes the
     * lifetime: one asked for, or dropped where one was stored, stores the
     * data anew. A read-only session's save is refused once changed.
     */
    private function save(): void {
        if ($this->read_only) {
            if (model_encode($this->session) !== model_encode($this->read ?? [])) {
                array_push($this->out, 'warning: Unable to write session: ' . MODEL_READ_ONLY, 'warning: ' . MODEL_WRITE_FAILED);
            }
            $this->pending = null;
            return;
        }
        $touch = $this->touches();
        $stored = $this->data($this->id);
        $stored_lives = $this->lives($this->id);
        $asked = ($this->pending['id'] ?? null) === $this->id;
        $this->write($this->id);
        if (!$touch || $stored === null) return;
        $versions = [];
        foreach ($this->store[$this->id] as $version) {
            $kept = ['data' => $stored] + $version;
            array_push($versions, ...match (true) {
                !$asked => [$kept],
                $version['life'] !== null => [$version],
                default => array_map(fn($life) => $life === null ? $kept : $version, $stored_lives),
            });
        }
        $this->store[$this->id] = array_values(array_unique($versions, SORT_REGULAR));
    }

    /** Reads the active id: $_SESSION as stored; early_refresh may renew the TTL. */
    private function read(): void {
        $this->session = $this->read = $this->data($this->id) ?? [];
        if ($this->ini['redis.session.early_refresh'] && $this->data($this->id) !== null) {
            $this->store[$this->id] = $this->withRenewals($this->store[$this->id]);
        }
    }

    /** A write or touch of $label: $_SESSION, with the lifetime asked for, or the one stored. */
    private function write(string $label): void {
        $lives = ($this->pending['id'] ?? null) === $label ? $this->pending['lives'] : $this->lives($label);
        $this->pending = null;
        $this->store[$label] = $this->written($lives);
    }

    /** The versions after writing $_SESSION now with one of $lives. */
    private function written(array $lives): array {
        return array_map(fn($life) => ['data' => $this->session, 'life' => $life, 'exp' => $this->expiry($life)], array_values($lives));
    }

    /** $versions, and each of them with its TTL renewed now. */
    public function withRenewals(array $versions): array {
        foreach ($versions as $version) {
            if ($version['data'] !== null) $versions[] = ['exp' => $this->expiry($version['life'])] + $version;
        }
        return array_values(array_unique($versions, SORT_REGULAR));
    }

    /** When a key written now with $life expires: the lifetime, or gc_maxlifetime without one. */
    public function expiry(?array $life): array {
        $seconds = $life === null ? $this->ini['session.gc_maxlifetime'] : $life[1];
        return ($life[0] ?? null) === 'fixed' ? [$life[1], $life[2]] : [$this->window[0] + $seconds, $this->window[1] + $seconds];
    }

    public function data(string $label): ?array {
        return $this->store[$label][0]['data'];
    }

    /** The lifetimes $label may have stored. */
    private function lives(string $label): array {
        return array_values(array_unique(array_column($this->store[$label], 'life'), SORT_REGULAR)) ?: [null];
    }

    private function newId(): string {
        $label = 'g' . ++$this->generated;
        $this->store[$label] = [self::ABSENT];
        return $label;
    }

    /**
     * A group of concurrent requests ran in $window; $runs holds, for each
     * process, its sections as they went: [label, how, same id?, start's
     * result, [n, by] read, close's result, warnings, what else it printed
     * (life: set_lifetime()'s result; regen: its result and the new id; fence:
     * whether it still held its lock after its freeze)]; a section that increments writes by =
     * "{$tag}p{process}s{section}". Returns [what breaks the rules (empty:
     * nothing), the new ids' labels => [process, section] of the regenerate
     * that made them, the features reached => count] and leaves in the store
     * the versions each id may be in now.
     */
    public function group(array $ini, array $runs, array $window, string $tag): array {
        $this->ini = $ini;
        $this->window = $window;
        $errors = [];
        $by_label = [];
        $reached = [];
        foreach ($runs as $p => $sections) {
            foreach ($sections as $s => [$label, $how, $same, $started, $read, $closed, $warnings, $said]) {
                $where = "process $p section $s ($how $label)";
                // Only these warn, as they must: a lock waited for in vain with lock_failure_readonly, one outlived.
                $expected = match ($how) {
                    'ro' => ['Failed to acquire session lock, session will be read only'],
                    'expire' => ['Session lock expired', MODEL_WRITE_FAILED],
                    default => [],
                };
                if ($warnings !== $expected) $errors[] = "$where: warnings " . json_encode($warnings) . ($expected ? ', not ' . json_encode($expected) : '');
                if ($started !== true || $closed !== true) $errors[] = "$where: session_start() gave " . json_encode($started) . ', the close ' . json_encode($closed);
                // set_lifetime() and regenerate succeed (the latter with a new id); a frozen holder's lock lapsed.
                $said_right = match (true) {
                    str_starts_with($how, 'life'), $how === 'fence' => $said === true,
                    str_starts_with($how, 'regen') => is_array($said) && $said[0] === true && is_string($said[1]) && $said[1] !== '',
                    default => $said === null,
                };
                if (!$said_right) $errors[] = "$where: said " . json_encode($said);
                // Strict mode refuses an id the store does not have: PHP makes a new one.
                $fresh = $this->strict && $this->data($label) === null;
                if ($same === $fresh) $errors[] = "$where: " . ($fresh ? 'kept the uninitialized id' : 'got a new id');
                if ($warnings === $expected && $closed === true) {
                    $feature = match ($how) {
                        'ro' => 'lock_failure_readonly', 'expire' => 'expired lock', 'fence' => 'fence',
                        'life', 'life_drop' => 'concurrent lifetime', 'regen', 'regen_del' => 'concurrent regenerate', 'destroy' => 'concurrent destroy',
                        default => null,
                    };
                    if ($feature !== null && ($how !== 'fence' || $said === true)) $reached[$feature] = ($reached[$feature] ?? 0) + 1;
                }
                if ($same) $by_label[$label][] = ['where' => $where, 'how' => $how, 'read' => $read, 'token' => "{$tag}p{$p}s$s", 'at' => [$p, $s]];
            }
        }
        $new = [];
        foreach ($by_label as $label => $sections) {
            if (!$this->locking) {
                $errors = array_merge($errors, $this->unlocked($label, $sections));
                continue;
            }
            $outcomes = $this->serialOrders($label, $sections);
            if ($outcomes === []) {
                $errors[] = "$label: no serial order of its locked sections fits what each read: " . implode(', ', array_map(fn($s) => "{$s['where']} read " . json_encode($s['read']), $sections));
                continue;
            }
            $versions = [];
            $made = [];
            foreach ($outcomes as $outcome) {
                array_push($versions, ...$this->versionsOf($label, $outcome['data'], $outcome['life'], $outcome['wrote']));
                foreach ($outcome['regen'] as $i => [$data, $life]) {
                    $made[$i] ??= [];
                    array_push($made[$i], ...$this->versionsOf($label, $data, $life, true));
                }
            }
            $this->store[$label] = array_values(array_unique($versions, SORT_REGULAR));
            foreach ($sections as $i => $section) {
                if (!str_starts_with($section['how'], 'regen')) continue;
                $made_label = $this->newId();
                $this->store[$made_label] = array_values(array_unique($made[$i], SORT_REGULAR));
                $new[$made_label] = $section['at'];
            }
        }
        return [$errors, $new, $reached];
    }

    /**
     * Without a lock updates may be lost: any state written may be the last.
     * (Groups without locking only increment, touch, abort and read_and_close.)
     */
    private function unlocked(string $label, array $sections): array {
        $errors = [];
        $base = $this->data($label);
        $first = [$base['n'] ?? 0, $base['by'] ?? ''];
        $increments = array_filter($sections, fn($s) => str_starts_with($s['how'], 'incr'));
        $states = array_merge([$first], array_map(fn($s) => [$s['read'][0] + 1, $s['token']], $increments));
        foreach ($sections as $s) {
            if (!in_array($s['read'], $states, true)) $errors[] = "$label: {$s['where']} read " . json_encode($s['read']) . ', a state never written (' . json_encode($states) . ')';
        }
        $writes = array_filter($sections, fn($s) => !in_array($s['how'], ['abort', 'rac'], true)) !== [];
        $versions = [];
        foreach ($states as $final) {
            $data = $final === $first ? ($writes ? $base ?? [] : $base) : array_replace($base ?? [], ['n' => $final[0], 'by' => $final[1]]);
            array_push($versions, ...$this->versionsOf($label, $data, 'base', $writes));
        }
        $this->store[$label] = array_values(array_unique($versions, SORT_REGULAR));
        return $errors;
    }

    /**
     * With locking, the sections on $label ran in some serial order, each
     * process's in its own order, each reading what the one before it left:
     * the outcomes of every such order, each ['data' => ?array, 'life' =>
     * 'base' (the stored one) or ?LIFE, 'wrote' => whether anything was
     * saved, 'regen' => [section index => [data, life] of the id it made]].
     * None: no order fits what they read.
     */
    private function serialOrders(string $label, array $sections): array {
        $outcomes = [];
        $seen = [];
        $walk = function (int $placed, array $state) use (&$walk, &$outcomes, &$seen, $sections) {
            $key = $placed . json_encode($state);
            if (isset($seen[$key])) return;
            $seen[$key] = true;
            if ($placed === (1 << count($sections)) - 1) {
                $outcomes[] = $state;
                return;
            }
            $data = $state['data'];
            foreach ($sections as $i => $section) {
                if ($placed & (1 << $i)) continue;
                // A process's earlier section on the same id came first.
                foreach ($sections as $j => $other) {
                    if ($j < $i && $other['at'][0] === $section['at'][0] && !($placed & (1 << $j))) continue 2;
                }
                if ($section['read'] !== [$data['n'] ?? 0, $data['by'] ?? '']) continue;
                $next = $state;
                $counted = array_replace($data ?? [], ['n' => $section['read'][0] + 1, 'by' => $section['token']]);
                switch ($section['how']) {
                    case 'abort': case 'rac': case 'ro': case 'expire':   // read, and saved nothing
                        break;
                    case 'touch':
                        [$next['data'], $next['wrote']] = [$data ?? [], true];
                        break;
                    case 'destroy':
                        [$next['data'], $next['life'], $next['wrote']] = [null, null, true];
                        break;
                    case 'regen': case 'regen_del':
                        // The new id takes the data and the lifetime; the old one keeps them or goes.
                        $next['regen'][$i] = [$counted, $state['life']];
                        [$next['data'], $next['wrote']] = [$section['how'] === 'regen' ? $counted : null, true];
                        if ($section['how'] === 'regen_del') $next['life'] = null;
                        break;
                    default:   // incr, incr_end, hold, fence, life, life_drop
                        [$next['data'], $next['wrote']] = [$counted, true];
                        if ($section['how'] === 'life') $next['life'] = ['slide', MODEL_GROUP_LIFETIME];
                        if ($section['how'] === 'life_drop') $next['life'] = null;
                }
                $walk($placed | (1 << $i), $next);
            }
        };
        $walk(0, ['data' => $this->data($label), 'life' => 'base', 'wrote' => false, 'regen' => []]);
        return $outcomes;
    }

    /** The versions of $label holding $data with $life ('base': each stored version's), renewed by a save if $wrote. */
    private function versionsOf(string $label, ?array $data, $life, bool $wrote): array {
        if ($data === null) return [self::ABSENT];
        $versions = [];
        foreach ($life === 'base' ? $this->store[$label] : [['life' => $life, 'exp' => null]] as $version) {
            $versions[] = ['data' => $data, 'life' => $version['life'], 'exp' => $wrote || $version['exp'] === null ? $this->expiry($version['life']) : $version['exp']];
        }
        return $wrote || !$this->ini['redis.session.early_refresh'] ? $versions : $this->withRenewals($versions);
    }
}
