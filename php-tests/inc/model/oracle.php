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
    };
}

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
    // (null: none), $_SESSION (null: never started) and the lifetime asked for
    // and not applied yet: ['id' => label, 'lives' => list<?LIFE>] (null: drop it).
    private array $ini;
    private array $window;
    private bool $active;
    private ?string $id;
    private ?array $session;
    private ?array $pending;
    private array $out;

    public function __construct(private bool $strict) {
        foreach (MODEL_IDS as $label) $this->store[$label] = [self::ABSENT];
    }

    private const ABSENT = ['data' => null, 'life' => null, 'exp' => null];

    /** The lines a request prints, given the time window [t0, t1] it ran in; the store as it leaves it. */
    public function request(array $request, array $window): array {
        $this->ini = $request['ini'];
        $this->window = $window;
        $this->active = false;
        $this->id = $this->session = $this->pending = null;
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
        if ($this->active) $this->write($this->id);
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
                $this->read();
                $this->active = !$read_and_close;   // read_and_close: closed without a write
                return true;
            case 'set':
                $this->session[$step[1]] = $step[2];
                return null;
            case 'unset':
                unset($this->session[$step[1]]);
                return null;
            case 'close':
                $this->write($this->id);
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
            case 'destroy':   // the data and its lifetime, asked for or stored; session_id() is '' then
                $this->store[$this->id] = [self::ABSENT];
                $this->active = false;
                $this->id = $this->pending = null;
                return true;
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
                $life = $seconds === 0 ? null : ($sliding ? ['slide', $seconds] : ['fixed', $this->window[0] + $seconds, $this->window[1] + $seconds]);
                $this->pending = ['id' => $this->id, 'lives' => [$life]];
                return true;
        }
    }

    /** Reads the active id: $_SESSION as stored; early_refresh may renew the TTL. */
    private function read(): void {
        $this->session = $this->data($this->id) ?? [];
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
     * result, [n, by] read, close's result, warnings]; a section that
     * increments writes by = "{$tag}p{process}s{section}". Returns what breaks the
     * rules (empty: nothing) and leaves in the store the versions each id may
     * be in now.
     */
    public function group(array $ini, array $runs, array $window, bool $locking, string $tag): array {
        $this->ini = $ini;
        $this->window = $window;
        $errors = [];
        $by_label = [];
        foreach ($runs as $p => $sections) {
            foreach ($sections as $s => [$label, $how, $same, $started, $read, $closed, $warnings]) {
                $where = "process $p section $s ($how $label)";
                if ($warnings) $errors[] = "$where: warnings " . json_encode($warnings);
                if ($started !== true || $closed !== true) $errors[] = "$where: session_start() gave " . json_encode($started) . ', the close ' . json_encode($closed);
                // Strict mode refuses an id the store does not have: PHP makes a new one.
                $fresh = $this->strict && $this->data($label) === null;
                if ($same === $fresh) $errors[] = "$where: " . ($fresh ? 'kept the uninitialized id' : 'got a new id');
                if ($same) $by_label[$label][] = ['where' => $where, 'how' => $how, 'read' => $read, 'token' => "{$tag}p{$p}s$s", 'acked' => !$warnings && $closed === true];
            }
        }
        foreach ($by_label as $label => $sections) {
            $base = $this->data($label);
            $first = [$base['n'] ?? 0, $base['by'] ?? ''];
            $increments = array_filter($sections, fn($s) => str_starts_with($s['how'], 'incr'));
            // With locking the locked sections ran in some serial order: each
            // acknowledged increment read the state the one before it wrote,
            // starting from the stored one, and every acknowledged write is in that chain.
            if ($locking) {
                $states = [$first];
                $left = $increments;
                while (($next = array_filter($left, fn($s) => $s['read'] === end($states))) !== []) {
                    if (count($next) > 1) $errors[] = "$label: two increments read " . json_encode(end($states)) . ': ' . implode(', ', array_column($next, 'where'));
                    $left = array_diff_key($left, $next);
                    $states[] = [end($states)[0] + 1, reset($next)['token']];
                }
                foreach ($left as $s) {
                    if ($s['acked']) $errors[] = "$label: {$s['where']} acknowledged an increment of " . json_encode($s['read']) . ', not in the chain ' . json_encode($states);
                }
                $finals = [end($states)];
            } else {
                // Without a lock updates may be lost: any state written may be the last.
                $states = array_merge([$first], array_map(fn($s) => [$s['read'][0] + 1, $s['token']], $increments));
                $finals = $states;
            }
            foreach ($sections as $s) {
                if (!in_array($s['read'], $states, true)) $errors[] = "$label: {$s['where']} read " . json_encode($s['read']) . ', a state never written (' . json_encode($states) . ')';
            }
            // What each final state stores, with the TTL of a write (or
            // touch) in the window, or as it was when only reads came.
            $writes = array_filter($sections, fn($s) => !in_array($s['how'], ['abort', 'rac'], true));
            $versions = [];
            foreach ($finals as $final) {
                $data = $final === $first ? ($writes ? $base ?? [] : $base) : array_replace($base ?? [], ['n' => $final[0], 'by' => $final[1]]);
                foreach ($this->store[$label] as $version) {
                    $versions[] = ['data' => $data, 'exp' => $writes ? $this->expiry($version['life']) : $version['exp']] + $version;
                }
            }
            $this->store[$label] = $writes || !$this->ini['redis.session.early_refresh'] ? $versions : $this->withRenewals($versions);
        }
        return $errors;
    }
}
