#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# Writes the benchmark table of README.md and bench/RESULTS.md between their marker comments,
# and every benchmark figure of README's prose between <!-- fig:NAME --> … <!-- /fig --> markers,
# from the runs recorded in bench/out/*.json (written by bench/run.sh, seats.sh, chat.sh,
# streams.sh, cluster.sh through bench/lib.sh's out_write). Nothing in them is typed by hand:
# every cell and figure is one of the latest run of the script named beside it.
#   python3 bench/table.py          rewrite both files
#   python3 bench/table.py --check  exit 1 if either file differs from what would be written, if a
#                                   figure marker names no figure, if README's prose holds a
#                                   measured figure outside the markers (stray_figures), or if a
#                                   record comes from a tree with uncommitted changes (ALLOW_DIRTY=1)
# Records of format 2 (bench/report.sh since issue 40) hold each side's value per round: cells
# show the median and the range (min–max), the ratio is taken per round, and server CPU per
# operation stands beside it. Older records (one run, no rounds) are shown as such until a full
# run replaces them.
import json, os, re, sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ORDER = ["run", "seats", "chat", "streams", "cluster", "auth"]
BEGIN = "<!-- bench-table:begin (written by bench/table.py from bench/out/*.json; do not edit by hand) -->"
END = "<!-- bench-table:end -->"
FIG = re.compile(r"<!-- fig:([a-z0-9-]+) -->(.*?)<!-- /fig -->", re.S)
FULL = 10  # seconds per side of a full run; shorter runs are marked as smoke runs
FULL_ROUNDS = 3
# what a reader must know about a row of a record of format 1, by record and row prefix
LEGACY_NOTES = {("seats", "restart"): "an upper bound: the port was polled every 0.1 s (bench/seats.sh now "
                                      "takes strata's own log time stamp)"}


def num(v, unit):
    if v is None:
        return "—"
    if unit in ("ms", "s", "KiB"):
        return f"{v:.3g}" if v < 100 else f"{v:,.0f}"
    if v >= 100000:
        return f"{v / 1000:,.0f}k"
    if v >= 10000:
        return f"{v / 1000:.1f}k"
    return f"{v:,.0f}"


def legacy(r):
    return r.get("format", 1) < 2


def side(row, r, which):
    """(median, min, max, n) of one side of a row; min/max None for a legacy record"""
    if legacy(r):
        v = row["strata"] if which == "strata" else row["peer_value"]
        return (v, None, None, 1) if v is not None else None
    s = row["strata"] if which == "strata" else row["peer_value"]
    return (s["median"], s["min"], s["max"], len(s["values"])) if s else None


def ratio(row, r):
    """(median, min, max) of strata ÷ peer per round, or None"""
    if legacy(r):
        # the follower rows of old streams runs reused the single-node Redis figure: no ratio
        if row["peer_value"] and row["strata"] is not None and row["unit"].endswith("/s") \
                and "as above" not in row["peer_note"]:
            return (row["strata"] / row["peer_value"], None, None)
        return None
    q = row.get("ratio")
    return (q["median"], q["min"], q["max"]) if q else None


def cell(s, unit, note):
    if s is None:
        return f"— ({note})" if note else "—"
    txt = num(s[0], unit) + (f" {unit}" if unit else "")
    if s[1] is not None and s[3] > 1:
        txt += f" ({num(s[1], unit)}–{num(s[2], unit)})"
    return f"{txt}; {note}" if note else txt


def ratio_txt(q):
    if q is None:
        return "—"
    t = f"{q[0]:.2f}×"
    return t + (f" ({q[1]:.2f}–{q[2]:.2f})" if q[1] is not None else " (one run)")


def cpu_txt(row, r):
    c = None if legacy(r) else row.get("cpu_us_per_op")
    if not c:
        return "—"
    f = lambda s: f"{s['median']:.3g}" if s else "—"
    return f"{f(c['strata'])} / {f(c['peer'])} µs per {c['op']}" if c["peer"] else f"{f(c['strata'])} µs per {c['op']}"


def note(row, r):
    n = row["strata_note"]
    if legacy(r):
        for (name, prefix), extra in LEGACY_NOTES.items():
            if r["name"] == name and row["benchmark"].startswith(prefix):
                n = f"{n}; {extra}" if n else extra
    return n


def table(runs):
    out = ["| benchmark | strata: median (min–max) | peer: median (min–max) | strata ÷ peer: median (min–max) "
           "| server CPU per operation, strata / peer (median) | run |", "|---|---|---|---:|---|---|"]
    for i, r in enumerate(runs, 1):
        for row in r["rows"]:
            peer = "—"
            if row["peer"]:
                peer = row["peer"] + ": " + cell(side(row, r, "peer"), row.get("peer_unit") or row["unit"],
                                                row["peer_note"])
            out.append(f"| {row['benchmark']} | {cell(side(row, r, 'strata'), row['unit'], note(row, r))} "
                       f"| {peer} | {ratio_txt(ratio(row, r))} | {cpu_txt(row, r)} | [{i}] |")
    out.append("")
    for i, r in enumerate(runs, 1):
        m = r["machine"]
        if legacy(r):
            how = (f"commit {r['commit']}{' (uncommitted changes)' if r['commit'].endswith('+changes') else ''}"
                   f" — **one run, before interleaved rounds (issue 40): no range, no CPU per operation; "
                   f"to be replaced by `DURATION=10 bench/report.sh`**")
        else:
            how = (f"commit {r['commit']}" + (" **with uncommitted changes: not a result**" if r["dirty"] else
                                             " (clean tree)") + f", {r['rounds']} rounds × {r['duration_s']:g} s per side")
        smoke = "" if r["duration_s"] >= FULL and r.get("rounds", FULL_ROUNDS) >= FULL_ROUNDS else (
            " — **smoke run: to be regenerated with a full run**")
        out.append(f"[{i}] `{r['command']}`, {r['date']}, {how}, {m['cores']} cores "
                   f"({m['cpu']}), {m['mem_gib']} GiB, load {m['load_start']:g} → {m['load_end']:g}{smoke}  ")
    out[-1] = out[-1].rstrip()
    return "\n".join(out)


# ---- figures in README's prose ----
def find(runs, name, prefix):
    for i, r in enumerate(runs, 1):
        if r["name"] == name:
            for row in r["rows"]:
                if row["benchmark"].startswith(prefix):
                    return i, r, row
    return None, None, None


def ratio_short(q):
    if q is None:
        return None
    return f"{q[0]:.2f}×" + (f" ({q[1]:.2f}–{q[2]:.2f})" if q[1] is not None else "")


def fig_group_ratio(runs):
    i, r, incr = find(runs, "cluster", "durable `POST /v1/counters/x/incr`, group of 3")
    _, _, post = find(runs, "cluster", "durable 1 KiB message post, group of 3")
    if not incr or not post:
        return "group/one node: see the benchmark table"
    return (f"group/one node {ratio_short(ratio(incr, r))} incr, {ratio_short(ratio(post, r))} posts "
            f"on 2 cores, run [{i}] of the benchmark table")


def fig_failover(runs):
    i, r, row = find(runs, "cluster", "failover")
    if not row:
        return "failover: see the benchmark table"
    if legacy(r):
        mx = re.search(r"max (\d+) ms", row["strata_note"])
        n = re.search(r"of (\d+) runs", row["strata_note"])
        return (f"failover median {num(row['strata'], 'ms')} ms" + (f", max {num(float(mx[1]), 'ms')} ms" if mx else "")
                + (f" over {n[1]} runs" if n else "") + f", run [{i}] of the benchmark table")
    s = row["strata"]
    return (f"failover median {num(s['median'], 'ms')} ms, {num(s['min'], 'ms')}–{num(s['max'], 'ms')} ms over "
            f"{len(s['values'])} runs, run [{i}] of the benchmark table")


def fig_fanout(runs):
    i, r, a = find(runs, "streams", "fan-out to 10000 streams, 16")
    _, _, b = find(runs, "streams", "fan-out to 10000 streams, 64")
    _, _, fa = find(runs, "streams", "fan-out to 10000 streams on a follower of a group of 3, 16")
    _, _, fb = find(runs, "streams", "fan-out to 10000 streams on a follower of a group of 3, 64")
    if not a or not b:
        return "fan-out: see the benchmark table"
    t = f"fan-out {ratio_short(ratio(a, r))} / {ratio_short(ratio(b, r))} Redis pub/sub's frames/s with 16 / 64 changes in flight"
    if fa and fb and ratio(fa, r) and ratio(fb, r):
        t += f", on a follower {ratio_short(ratio(fa, r))} / {ratio_short(ratio(fb, r))}"
    return t + f", run [{i}] of the benchmark table"


def fig_stream_mem(runs):
    i, r, row = find(runs, "streams", "memory per idle stream")
    if not row or legacy(r) or not row["strata"]:
        return "an idle stream's memory: see the benchmark table"
    s = row["strata"]
    n = re.search(r"at (\d+) streams", row["benchmark"])
    return (f"an idle stream costs {num(s['median'], 'KiB')} KiB of RSS ({num(s['min'], 'KiB')}–{num(s['max'], 'KiB')})"
            + (f" at {int(n[1]):,} streams" if n else "") + f", run [{i}] of the benchmark table")


FIGS = {"group-ratio": fig_group_ratio, "failover": fig_failover, "fanout": fig_fanout, "stream-mem": fig_stream_mem}


def figures(text, runs, errors):
    def sub(m):
        f = FIGS.get(m[1])
        if not f:
            errors.append(f"<!-- fig:{m[1]} --> names no figure of bench/table.py ({', '.join(FIGS)})")
            return m[0]
        return f"<!-- fig:{m[1]} -->{f(runs)}<!-- /fig -->"
    return FIG.sub(sub, text)


# A measured figure typed into README's prose (a throughput, a p50/p99, a ratio in the
# generator's two-decimal form) outside the table and the fig markers goes stale unseen: --check
# names it. Limits and targets of the design (1 MiB, 10 ms heartbeat, 1.5× …) are not caught.
STRAY = re.compile(r"\d[\d.,]*\s?k?\s?(?:req/s|frames/s|tx/s|writes/s|bookings/s|2xx/s)"
                   r"|\bp(?:50|99)\s+(?:of\s+)?\d[\d.]*\s?(?:ms|µs|s)?|\d\.\d\d×")


def stray_figures(text):
    text = FIG.sub(lambda m: " " * len(m[0]), text)
    a, b = text.find(BEGIN), text.find(END)
    if a >= 0 and b > a:
        text = text[:a] + " " * (b - a) + text[b:]
    out = []
    for m in STRAY.finditer(text):
        line = text.count("\n", 0, m.start()) + 1
        out.append(f"README.md:{line}: a measured figure ({m[0]!r}) outside the table and the "
                   "<!-- fig --> markers: generate it (bench/table.py FIGS) or point to its run")
    return out


def render(path, body, runs, errors):
    text = open(path).read()
    a, b = text.find(BEGIN), text.find(END)
    if a < 0 or b < a:
        sys.exit(f"{path}: markers {BEGIN!r} … {END!r} not found")
    new = text[: a + len(BEGIN)] + "\n" + body + "\n" + text[b:]
    return text, figures(new, runs, errors)


def main():
    check = "--check" in sys.argv[1:]
    runs = []
    for name in ORDER:
        p = os.path.join(ROOT, "bench", "out", name + ".json")
        if os.path.exists(p):
            runs.append(json.load(open(p)))
    if not runs:
        sys.exit("no bench/out/*.json: run bench/report.sh (or one of the bench scripts) first")
    errors = [f"bench/out/{r['name']}.json: recorded on a tree with uncommitted changes (ALLOW_DIRTY=1): "
              f"not a result; commit, then run bench/report.sh again" for r in runs if r.get("dirty")]
    body = table(runs)
    errors += stray_figures(open(os.path.join(ROOT, "README.md")).read())
    stale = []
    for f in ("README.md", "bench/RESULTS.md"):
        path = os.path.join(ROOT, f)
        old, new = render(path, body, runs, errors)
        if new != old:
            if check:
                stale.append(f)
            else:
                open(path, "w").write(new)
    if stale:
        errors.append(f"{' and '.join(stale)}: the benchmark table or a <!-- fig --> figure differs from "
                      "bench/out/*.json (run python3 bench/table.py)")
    for e in errors:
        print(e, file=sys.stderr)
    if errors and check:
        sys.exit(1)


main()
