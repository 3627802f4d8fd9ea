#!/usr/bin/env python3
"""Where two builds or settings differ per warm request, function by function:
callgrind dumps of the same loop run for SHORT and LONG cycles, for A and B.
Per request = (LONG's cost - SHORT's) / (LONG - SHORT cycles), as bench/run.sh
counts a request's instructions.

    callgrind-diff.py CYCLES A_SHORT A_LONG B_SHORT B_LONG [TOP] [REGEX]

Prints the functions whose inclusive and self costs per request differ most
(A - B), those matching REGEX only (default: everything).
"""
import re
import subprocess
import sys
from collections import defaultdict

cycles = int(sys.argv[1])
dumps = sys.argv[2:6]
top = int(sys.argv[6]) if len(sys.argv) > 6 else 30
wanted = re.compile(sys.argv[7]) if len(sys.argv) > 7 else None


def costs(path, inclusive):
    out = subprocess.run(['callgrind_annotate', f'--inclusive={"yes" if inclusive else "no"}', '--threshold=100',
                          path], capture_output=True, text=True, check=True).stdout
    d = defaultdict(int)
    for line in out.splitlines():
        m = re.match(r'\s*([\d,]+) \([^)]*\)\s+(.*)$', line)
        if not m or ':' not in m.group(2):
            continue
        name = m.group(2)
        name = name[4:] if name.startswith('???:') else re.sub(r'^\S*?:', '', name, count=1)
        d[re.sub(r' \[[^\]]*\]$', '', name)] += int(m.group(1).replace(',', ''))
    return d


for inclusive in (True, False):
    per = []
    for short, long in (dumps[0:2], dumps[2:4]):
        a, b = costs(short, inclusive), costs(long, inclusive)
        per.append({k: (b.get(k, 0) - a.get(k, 0)) / cycles for k in set(a) | set(b)})
    rows = sorted(((per[0].get(k, 0) - per[1].get(k, 0), per[0].get(k, 0), per[1].get(k, 0), k)
                   for k in set(per[0]) | set(per[1]) if not wanted or wanted.search(k)), key=lambda r: -abs(r[0]))
    print(f'\n{"inclusive" if inclusive else "self"} instructions per request: A - B, A, B, function')
    for d, a, b, k in rows[:top]:
        if round(d):
            print(f'  {d:+7.0f} {a:8.0f} {b:8.0f}  {k[:140]}')
