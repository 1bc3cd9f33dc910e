#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# The loop's long turns, from a perf record of the server with its epoll_wait enters and exits
# traced exactly beside a CPU clock, e.g.
#   perf record -g -e raw_syscalls:sys_enter --filter 'id==232||id==281' \
#     -e raw_syscalls:sys_exit --filter 'id==232||id==281' -e cpu-clock/period=250000/ -c 1 \
#     [--call-graph dwarf,8192] -p PID -o FILE
#   perf script -i FILE -F tid,time,event,ip,sym,dso | bench/turns.py LOOP_TID 2 4000 [wall]
# (bench/loopstall.sh erase takes these options as ERASE_PERF_OPTS.)
# reads `perf script -F tid,time,event,ip,sym,dso` (with callchains) from stdin; LOOP tid = argv[1]
# turns of the loop thread = from epoll_wait's exit to the next epoll_wait's enter; for each turn
# longer than argv[2] ms: its wall time, the loop's cpu-clock samples in it (at argv[3] Hz) and
# their stacks (strata frames, innermost first), collapsed
import sys, re, collections
loop = int(sys.argv[1]); lim = float(sys.argv[2]) / 1000; hz = float(sys.argv[3])
hdr = re.compile(r'^\s*(\d+)\s+(\d+\.\d+):\s+(?:\d+\s+)?(\S+):')
events = []  # (time, kind, stack)
cur = None
for line in sys.stdin:
    m = hdr.match(line)
    if m:
        if cur: events.append(cur)
        tid, t, ev = int(m.group(1)), float(m.group(2)), m.group(3)
        cur = None
        if tid != loop: continue
        cur = [t, ev, []]
        continue
    if cur is not None:
        s = line.strip()
        if s:
            parts = s.split(None, 1)
            sym = parts[1] if len(parts) > 1 else parts[0]
            sym = re.sub(r'\+0x[0-9a-f]+', '', sym)
            cur[2].append(sym)
if cur: events.append(cur)
events.sort(key=lambda e: e[0])
turns = []
start = None; samples = []
for t, ev, st in events:
    if ev.startswith('raw_syscalls:sys_exit'):
        start = t; samples = []
    elif ev.startswith('raw_syscalls:sys_enter'):
        if start is not None and t - start > lim:
            turns.append((t - start, start, samples))
        start = None
    elif start is not None:
        samples.append(st)
# argv[4] 'wall': the longest turns by wall time (a turn that waited for a core is long in wall
# with little CPU); default: the dearest by CPU
turns.sort(key=(lambda x: -x[0]) if len(sys.argv) > 4 and sys.argv[4] == 'wall' else (lambda x: -len(x[2])))
print(f"{len(turns)} turns over {lim*1000:.1f} ms")
for wall, t0, samples in turns[:15]:
    print(f"\n== turn at {t0:.6f}: {wall*1000:.2f} ms wall, {len(samples)} samples = {len(samples)/hz*1000:.2f} ms CPU")
    c = collections.Counter()
    for st in samples:
        fr = [f for f in st if '(' in f and ('strata' in f or 'libuv' in f or 'liblmdb' in f or 'libwebsockets' in f)]
        key = ' <- '.join(f.split(' (')[0] for f in fr[:9]) or (st[0].split(' (')[0] if st else '?')
        c[key] += 1
    for k, n in c.most_common(8):
        print(f"  {n:4d}  {k}")
