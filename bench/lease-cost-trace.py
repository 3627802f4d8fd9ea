#!/usr/bin/env python3
"""Where a fresh process's first locked request spends its time, from one
`perf record` of it (bench/lease-cost.sh's `cold-trace` part records with
CLOCK_MONOTONIC, so PHP's hrtime() stamps the request in the same clock):
system calls (raw_syscalls), the scheduler's switches, and uprobes on the
extension's watchdog::watch, pin_library and libc's pthread_create.

    lease-cost-trace.py PERF_DATA START_NS END_NS PID   -> one JSON line {"parts": {name: µs}}
                                                       ({"parts": null} if perf lost the events)

The request's parts, on its (main) thread: before the take's send, the take's
round trip, from its reply to the save's send, the save's round trip and the
rest; the time in each system call the lease adds (the thread's start, the
timerfd), the uprobes' durations, and the time the main thread was runnable
but off its CPU while the watchdog thread ran there (the new thread's start-up
preempting the request).
"""
import json
import re
import subprocess
import sys
from collections import defaultdict

data, start, end, pid = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
out = subprocess.run(['perf', 'script', '-i', data, '--ns', '-F', 'comm,tid,cpu,time,event,trace'],
                     capture_output=True, text=True, check=True).stdout

NAMES = {0: 'read', 3: 'close', 7: 'poll', 9: 'mmap', 10: 'mprotect', 11: 'munmap', 13: 'rt_sigaction',
         14: 'rt_sigprocmask', 39: 'getpid', 42: 'connect', 44: 'sendto', 45: 'recvfrom', 157: 'prctl',
         202: 'futex', 283: 'timerfd_create', 286: 'timerfd_settime', 334: 'rseq', 273: 'set_robust_list',
         435: 'clone3', 56: 'clone'}
line_re = re.compile(r'^\s*(.+?)\s+(\d+)\s+\[(\d+)\]\s+(\d+)\.(\d+):\s+(\S+):\s*(.*)$')

events = []
for line in out.splitlines():
    m = line_re.match(line)
    if not m:
        continue
    comm, tid, cpu, sec, frac, event, trace = m.groups()
    t = int(sec) * 1_000_000_000 + int(frac.ljust(9, '0')[:9])
    events.append((t, int(tid), int(cpu), event, trace, comm))
events.sort(key=lambda e: e[0])

# System calls: (tid, nr, enter, exit, ret).
open_calls, calls = {}, []
for t, tid, cpu, event, trace, comm in events:
    if event == 'raw_syscalls:sys_enter':
        m = re.match(r'NR (-?\d+)', trace)
        if m:
            open_calls[tid] = (int(m.group(1)), t)
    elif event == 'raw_syscalls:sys_exit':
        m = re.match(r'NR (-?\d+) = (-?\d+)', trace)
        if not m:
            continue
        nr, ret = m.groups()
        if tid in open_calls and open_calls[tid][0] == int(nr):
            calls.append((tid, int(nr), open_calls.pop(tid)[1], t, int(ret)))

# perf records every process (-a): only the request's (its PID is its main
# thread's id) and the thread it starts count.
main = pid
thread = next((c[4] for c in calls if c[0] == main and NAMES.get(c[1]) == 'clone3' and c[4] > 0
               and start <= c[2] <= end), None)
ours = {main, thread}
calls = [c for c in calls if c[0] in ours]
in_window = [c for c in calls if start <= c[2] <= end]
sends = [c for c in in_window if c[0] == main and NAMES.get(c[1]) == 'sendto']
if len(sends) != 2:
    # The take and the save, nothing else (a redirect, NOSCRIPT, a slot map fetch: another run).
    print(json.dumps({'parts': None, 'error': f'{len(sends)} sends in the request, not 2'}))
    sys.exit(0)
take, save = sends


def reply_after(send):
    """When the first recvfrom after `send` that read something returned."""
    return min((c[3] for c in in_window if c[0] == main and NAMES.get(c[1]) == 'recvfrom'
                and c[2] >= send[3] and c[4] > 0), default=None)


take_reply, save_reply = reply_after(take), reply_after(save)
if take_reply is None or save_reply is None:
    # perf lost events (its buffers full on a loaded machine): this run says nothing.
    print(json.dumps({'parts': None, 'error': 'no reply to a send in the record'}))
    sys.exit(0)
parts = {
    'total': end - start,
    'start -> take send': take[2] - start,
    'take round trip (send -> reply)': take_reply - take[2],
    'take reply -> save send': save[2] - take_reply,
    'save round trip (send -> reply)': save_reply - save[2],
    'save reply -> end': end - save_reply,
}

# System calls on the main thread within the request, by name.
by_name = defaultdict(int)
count = defaultdict(int)
for tid, nr, t0, t1, ret in in_window:
    if tid == main:
        by_name[NAMES.get(nr, f'nr{nr}')] += t1 - t0
        count[NAMES.get(nr, f'nr{nr}')] += 1
for name in ('clone3', 'mmap', 'mprotect', 'rt_sigprocmask', 'rt_sigaction', 'timerfd_create', 'timerfd_settime',
             'getpid', 'connect', 'poll'):
    parts[f'syscall {name} (main thread, in the call)'] = by_name.get(name, 0)
    parts[f'syscall {name}: calls (a count)'] = count.get(name, 0) * 1000   # µs below: / 1000
parts['in system calls, main thread (waits for replies included)'] = sum(by_name.values())
parts['system calls of the main thread: calls (a count)'] = sum(count.values()) * 1000

# On-CPU intervals of the main thread and the watchdog thread, and the main
# thread's runnable-but-preempted intervals, from the scheduler's switches.
on_cpu = defaultdict(list)      # tid -> [(in, out)]
preempted = []                  # main: [(out, back in)]
running_since, preempted_since = {}, None
for t, tid, cpu, event, trace, comm in events:
    if event != 'sched:sched_switch':
        continue
    m = re.search(r'prev_pid=(\d+) .*prev_state=(\S+) ==> next_comm=.* next_pid=(\d+)', trace)
    prev, state, nxt = int(m.group(1)), m.group(2), int(m.group(3))
    if prev in running_since:
        on_cpu[prev].append((running_since.pop(prev), t))
    if prev == main and state.startswith('R'):
        preempted_since = t
    running_since[nxt] = t
    if nxt == main and preempted_since is not None:
        preempted.append((preempted_since, t))
        preempted_since = None


def clip(intervals):
    return [(max(a, start), min(b, end)) for a, b in intervals if b > start and a < end]


def overlap(xs, ys):
    return sum(max(0, min(b, d) - max(a, c)) for a, b in xs for c, d in ys)


pre = clip(preempted)
parts['main runnable but preempted'] = sum(b - a for a, b in pre)
if thread is not None:
    th = clip(on_cpu[thread])
    parts['watchdog thread on a CPU'] = sum(b - a for a, b in th)
    parts['main preempted by the watchdog thread'] = overlap(pre, th)
    def within(lo, hi):
        return overlap([(max(a, lo), min(b, hi)) for a, b in pre if b > lo and a < hi], th)
    parts['  of it between the take reply and the save send'] = within(take_reply, save[2])
    parts['  of it in the save round trip'] = within(save[2], save_reply)
    first = [c for c in calls if c[0] == thread]
    read = next((c for c in first if NAMES.get(c[1]) == 'read'), None)
    clone = next(c for c in in_window if c[0] == main and NAMES.get(c[1]) == 'clone3')
    if read:
        parts['clone3 -> the thread blocks in read (wall)'] = read[2] - clone[2]
    parts['watchdog thread: system calls before it blocks'] = sum(
        c[3] - c[2] for c in first if read is None or c[2] < read[2])

# Uprobes: entry/return pairs on the main thread (perf records every process's hits).
probe_open = {}
durations = defaultdict(int)
hits = defaultdict(int)
for t, tid, cpu, event, trace, comm in events:
    if not event.startswith('probe_') or not (start <= t <= end) or tid != main:
        continue
    name = event.split(':', 1)[1]
    if name.endswith('__return'):
        base = name[:-len('__return')]
        if (tid, base) in probe_open:
            durations[base] += t - probe_open.pop((tid, base))
    else:
        probe_open[(tid, name)] = t
        hits[name] += 1
parts['watch() (uprobe)'] = durations.get('rcs_watch', 0)
parts['pthread_create() (uprobe)'] = durations.get('rcs_pthread_create', 0)
parts['pin_library() calls (uprobe; a count)'] = hits.get('rcs_pin_library', 0) * 1000

print(json.dumps({'parts': {k: v / 1000 for k, v in parts.items()}}))
