#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# Writes the benchmark table of README.md and bench/RESULTS.md between their marker comments
# from the runs recorded in bench/out/*.json (written by bench/run.sh, seats.sh, chat.sh,
# cluster.sh, streams.sh through bench/lib.sh's out_write). Nothing in the table is typed by hand:
# every cell is a figure of the latest run of the script named under it.
#   python3 bench/table.py          rewrite both files
#   python3 bench/table.py --check  exit 1 if either file differs from what would be written
import json, os, sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ORDER = ["run", "seats", "chat", "streams", "cluster"]
BEGIN = "<!-- bench-table:begin (written by bench/table.py from bench/out/*.json; do not edit by hand) -->"
END = "<!-- bench-table:end -->"
FULL = 10  # seconds per side of a full run; shorter runs are marked as smoke runs


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


def cell(v, unit, note):
    s = num(v, unit) + (f" {unit}" if v is not None and unit else "")
    return f"{s} ({note})" if note else s


def table(runs):
    out = ["| benchmark | strata | peer | strata ÷ peer | run |", "|---|---|---|---:|---|"]
    for i, r in enumerate(runs, 1):
        for row in r["rows"]:
            peer = "—"
            if row["peer"]:
                peer = row["peer"] + ": " + cell(row["peer_value"], row.get("peer_unit") or row["unit"],
                                                row["peer_note"])
            ratio = "—"
            if row["peer_value"] and row["strata"] is not None and row["unit"].endswith("/s"):
                ratio = f"{row['strata'] / row['peer_value']:.2f}×"
            out.append(f"| {row['benchmark']} | {cell(row['strata'], row['unit'], row['strata_note'])} "
                       f"| {peer} | {ratio} | [{i}] |")
    out.append("")
    for i, r in enumerate(runs, 1):
        m = r["machine"]
        smoke = "" if r["duration_s"] >= FULL else (
            f" — **smoke run ({r['duration_s']:g} s per side): to be regenerated with a full run**")
        out.append(f"[{i}] `{r['command']}`, {r['date']}, commit {r['commit']}, {m['cores']} cores "
                   f"({m['cpu']}), {m['mem_gib']} GiB, load {m['load_start']:g} → {m['load_end']:g}{smoke}  ")
    out[-1] = out[-1].rstrip()
    return "\n".join(out)


def splice(path, body, check):
    text = open(path).read()
    a, b = text.find(BEGIN), text.find(END)
    if a < 0 or b < a:
        sys.exit(f"{path}: markers {BEGIN!r} … {END!r} not found")
    new = text[: a + len(BEGIN)] + "\n" + body + "\n" + text[b:]
    if check:
        return new == text
    if new != text:
        open(path, "w").write(new)
    return True


def main():
    check = "--check" in sys.argv[1:]
    runs = []
    for name in ORDER:
        p = os.path.join(ROOT, "bench", "out", name + ".json")
        if os.path.exists(p):
            runs.append(json.load(open(p)))
    if not runs:
        sys.exit("no bench/out/*.json: run bench/report.sh (or one of the bench scripts) first")
    body = table(runs)
    ok = all([splice(os.path.join(ROOT, f), body, check) for f in ("README.md", "bench/RESULTS.md")])
    if check and not ok:
        sys.exit("README.md or bench/RESULTS.md: the benchmark table differs from bench/out/*.json "
                 "(run python3 bench/table.py)")


main()
