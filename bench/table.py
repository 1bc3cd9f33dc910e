#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# Writes the benchmark table of README.md and bench/RESULTS.md between their marker comments,
# and every benchmark figure of README's prose between <!-- fig:NAME --> … <!-- /fig --> markers,
# from the runs recorded in bench/out/NAME/DATE.json (written by bench/run.sh, seats.sh, chat.sh,
# streams.sh, cluster.sh, auth.sh through bench/lib.sh's out_write). Nothing in them is typed by
# hand.
#   python3 bench/table.py          rewrite both files
#   python3 bench/table.py --check  exit 1 if either file differs from what would be written, if a
#                                   figure marker names no figure, if a measured figure stands in
#                                   README's prose or bench/RESULTS.md where it may not (stray_*
#                                   below), or if a record is not a result: taken on a tree with
#                                   uncommitted changes (ALLOW_DIRTY=1) or on a loaded machine (the
#                                   load gate of bench/lib.sh, thresholds in the record)
# Records accumulate: every cell is the median and the range (min–max) over the rounds of ALL the
# runs it draws on, so a range covers the runs at different times, not only the rounds of one;
# a row whose runs are all within an hour says "one run". The runs drawn on are those taken on a
# commit that holds the last change to src/ (git log -1 -- src); when there is none, every run,
# and the row says "stale: src changed since commit X" (X the newest run's commit) until a run on
# the current code replaces it. Staleness never fails --check: a commit to src/ must not turn CI
# red. Records of format 2 (before the load gate) are shown, with their load, as not gated.
import glob, json, os, re, statistics, subprocess, sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ORDER = ["run", "seats", "chat", "streams", "cluster", "auth", "bigroom", "atsize", "notifyab", "eraseab", "keyedcost"]
BEGIN = "<!-- bench-table:begin (written by bench/table.py from bench/out/*.json; do not edit by hand) -->"
END = "<!-- bench-table:end -->"
FIG = re.compile(r"<!-- fig:([a-z0-9-]+) -->(.*?)<!-- /fig -->", re.S)
FULL = 10  # seconds per side of a full run; shorter runs are marked as smoke runs
FULL_ROUNDS = 3
APART = 3600  # seconds: runs closer than this count as one time
# rows renamed since a record was taken: old name → new (the old record's figures are the same work)
RENAMED = {
    "`GET /v1/counters/x` with an ES256 token (JWKS) on every request":
        "`GET /v1/counters/x` with one ES256 token (JWKS) sent on every request, verified once and then cached",
    "durable booking of 2 random seats, a fresh event each round (answers: wins + conflicts)":
        "durable booking of 2 random seats, a fresh event each round (bookings won; conflicts apart)",
}


def num(v, unit):
    if v is None:
        return "—"
    if unit in ("ms", "s", "KiB", "µs"):
        return f"{v:.3g}" if v < 100 else f"{v:,.0f}"
    if v >= 100000:
        return f"{v / 1000:,.0f}k"
    if v >= 10000:
        return f"{v / 1000:.1f}k"
    return f"{v:,.0f}"


def stats(v):
    return {"median": statistics.median(v), "min": min(v), "max": max(v), "values": v} if v else None


# ---- records ----
def wrk_wins(path):
    """(2xx answers, non-2xx answers, seconds) from a raw wrk output: wrk's own count"""
    t = open(path).read()
    n = int(re.search(r"(\d+) requests in ([\d.]+)(m?s)", t)[1])
    secs = float(re.search(r"requests in ([\d.]+)s", t)[1])
    bad = re.search(r"Non-2xx or 3xx responses: (\d+)", t)
    bad = int(bad[1]) if bad else 0
    return n - bad, bad, secs


def redis_wins(path):
    """(won, conflicts, seconds) from a raw redis-benchmark output of bench/seats.sh"""
    t = open(path).read()
    secs = float(re.search(r"successful calls in ([\d.]+) s", t)[1])
    m = re.search(r"won (\d+), conflicts (\d+)", t)
    return int(m[1]), int(m[2]), secs


def amend_seats_v2(r):
    """A seats record of format 2 counted a booking's answers (wins + 409 conflicts) as its
    throughput. Its raw output holds the wins per round: wrk's requests less its "Non-2xx" count
    for strata (strata's own 201 count was kept only as a median), the Lua script's booking:seq
    for Redis. The booking rows are recomputed from it: wins per second, the ratio per round,
    conflicts per second apart."""
    raw = os.path.join(ROOT, r["raw"])
    rounds = range(1, r["rounds"] + 1)
    try:
        s = [wrk_wins(os.path.join(raw, f"{i}-strata-book.txt")) for i in rounds]
        peers = {k: [redis_wins(os.path.join(raw, f"{i}-redis-{k}-book.txt")) for i in rounds]
                 for k in ("always", "everysec")}
    except (OSError, TypeError):
        return
    sw = [round(w / t) for w, _, t in s]
    sc = [round(c / t) for _, c, t in s]
    for row in r["rows"]:
        if not row["benchmark"].startswith("durable booking of 2 random seats"):
            continue
        k = "always" if "always" in row["peer"] else "everysec"
        pw = [round(w / t) for w, _, t in peers[k]]
        pc = [round(c / t) for _, c, t in peers[k]]
        row["unit"] = row["peer_unit"] = "bookings won/s"
        row["strata"], row["peer_value"] = stats(sw), stats(pw)
        row["ratio"] = stats([round(a / b, 4) for a, b in zip(sw, pw)])
        row["conflicts_per_s"] = {"strata": stats(sc), "peer": stats(pc)}
        own = re.search(r"median (\d+) won", row["strata_note"])
        wrk = statistics.median([w for w, _, _ in s])
        row["strata_note"] = (row["strata_note"] + "; wins per round recomputed from the raw wrk output "
                              "(requests less Non-2xx: wrk's count" + (
                                  f", median {wrk:.0f} against strata's own {own[1]}, the only per-run count of its "
                                  "201s this record kept)" if own else ")"))
        row["peer_note"] = row["peer_note"].replace("interleaved", "interleaved, strata always first")


def load_runs():
    """{name: [record, …] oldest first}; each record gets "file" (its path) and "time" (epoch s)"""
    import datetime
    out = {}
    for name in ORDER:
        d = os.path.join(ROOT, "bench", "out", name)
        runs = []
        if os.path.isdir(d):
            for f in sorted(os.listdir(d)):
                if f.endswith(".json"):
                    r = json.load(open(os.path.join(d, f)))
                    r["file"] = f"bench/out/{name}/{f}"
                    r["time"] = datetime.datetime.strptime(r["date"], "%Y-%m-%d %H:%M UTC").replace(
                        tzinfo=datetime.timezone.utc).timestamp()
                    if r.get("format", 1) == 2 and name == "seats" and r.get("raw"):
                        amend_seats_v2(r)
                    if name == "atsize":
                        if len(r.get("sizes", [])) < 2 or gate_errors(r):
                            continue  # a one-size or loaded session measurement: RESULTS.md's, not the table's
                        r["rows"] = atsize_rows(r)
                    if name == "notifyab":
                        r["rows"] = new_rows(r["rows"])
                    for row in r["rows"]:
                        row["benchmark"] = RENAMED.get(row["benchmark"], row["benchmark"])
                    runs.append(r)
        if runs:
            out[name] = sorted(runs, key=lambda r: r["time"])
    return out


def new_rows(rows):
    """bench/notifyab.sh records both binaries of its A/B against Redis, the old one's rows named
    "… (old)": the table shows the binary of the commit (the new one) only"""
    return [x for x in rows if not x["benchmark"].endswith("(old)")]


def atsize_rows(r):
    """bench/atsize.sh records its figures per size, not as rows: the table compares its largest
    size with its smallest (the bars of issue 48 are ratios to the smallest: time per user flat,
    RssAnon within 10 %, the read p99 within 1.5x), one row each, the ratio as strata / peer"""
    small, big = min(r["sizes"], key=lambda s: s["users"]), max(r["sizes"], key=lambda s: s["users"])
    what = f"{big['users']:,} users × {round(big['posts'] / big['users'])} posts"
    if big.get("rooms"):
        what = f"{big['users']:,} users and {big['rooms']:,} rooms, {r['command'].split('MSGS=')[1].split()[0]} posts each"
    peer = f"the same at {small['users']:,} users"

    def one(v):
        return {"median": v, "min": v, "max": v, "values": [v]}

    def row(bench, key, unit, note, scale=1.0, cpu=None):
        a, b = big[key] * scale, small[key] * scale
        out = {"benchmark": f"one node, {what}, all cooled: {bench}", "unit": unit, "strata": one(a),
               "strata_note": note, "peer": peer, "peer_value": one(b), "peer_note": "", "peer_unit": unit,
               "ratio": one(round(a / b, 4)) if b else None, "cpu_us_per_op": None, "conflicts_per_s": None}
        if cpu:
            out["cpu_us_per_op"] = {"op": cpu[0], "strata": one(big[cpu[1]]), "peer": one(small[cpu[1]])}
        return out
    return [row("first flush of every user, time per user", "flush_ms_per_user", "ms", "target: flat (ratio ≈ 1)"),
            row("RssAnon after a restart and 10 s of random cold reads", "rss_after_reads_kib", "MiB",
                "target: within 10 %, ≤ the flags' sum + 128 MiB", 1 / 1024),
            row("newest 50 of a random cold user, p99", "read_p99_ms", "ms", "target: ≤ 1.5×",
                cpu=("read", "read_cpu_us")),
            row("restart → /healthz 200", "restart_to_healthz_ms", "ms", "target: < 2 s")]


def gate_errors(r):
    """why a record is not a result (empty if it is)"""
    e = []
    if r.get("dirty"):
        e.append("recorded on a tree with uncommitted changes (ALLOW_DIRTY=1)")
    g = r.get("gate")
    if r.get("format", 1) >= 3:
        if not g:
            e.append("no load gate figures")
        else:
            if g["load_start"] > g["load_max"]:
                e.append(f"loaded machine: 1-minute load {g['load_start']:g} before the run > {g['load_max']:g}")
            if g["foreign_cpu_pct"] > g["foreign_max_pct"]:
                e.append(f"loaded machine: CPU outside the bench {g['foreign_cpu_pct']:g} % of the machine "
                         f"> {g['foreign_max_pct']:g} %")
        if r.get("loaded"):
            e.append("marked loaded")
    return e


def git(*a):
    try:
        p = subprocess.run(["git", "-C", ROOT, *a], capture_output=True, text=True)
        return p.returncode, p.stdout.strip()
    except OSError:
        return 1, ""


def last_src():
    rc, h = git("log", "-1", "--format=%H", "--", "src")
    return h if rc == 0 and h else None


def fresh(r, src):
    """True if the record's commit holds the last change to src/ (False if git cannot tell)"""
    if not src:
        return False
    return git("merge-base", "--is-ancestor", src, r["commit"].split("+")[0])[0] == 0


# ---- rows over runs ----
def combine(name, runs, src):
    """the table's rows of one script: [{row (newest), runs, strata, peer, ratio, cpu, conflicts,
    times, stale}]"""
    use = [r for r in runs if fresh(r, src)]
    stale = None
    if not use:
        # the runs the row drew on while it was fresh: those holding the last change to src/ as of
        # the newest run's commit (so a later change to src/ changes the marks, not the figures)
        stale = runs[-1]["commit"]
        rc, base = git("log", "-1", "--format=%H", stale.split("+")[0], "--", "src")
        use = [r for r in runs if rc == 0 and base and fresh(r, base)] or runs
    newest = use[-1]
    out = []
    for row in newest["rows"]:
        key = (row["benchmark"], row["peer"])
        got = [(r, x) for r in use for x in r["rows"] if (x["benchmark"], x["peer"]) == key
               and x["unit"] == row["unit"]]

        def cat(get):
            v = []
            for _, x in got:
                s = get(x)
                if s:
                    v += s["values"]
            return stats(v)
        cpu = None
        if row.get("cpu_us_per_op"):
            cpu = {"op": row["cpu_us_per_op"]["op"],
                   "strata": cat(lambda x: (x.get("cpu_us_per_op") or {}).get("strata")),
                   "peer": cat(lambda x: (x.get("cpu_us_per_op") or {}).get("peer"))}
        conf = None
        if row.get("conflicts_per_s"):
            conf = {"strata": cat(lambda x: (x.get("conflicts_per_s") or {}).get("strata")),
                    "peer": cat(lambda x: (x.get("conflicts_per_s") or {}).get("peer"))}
        times = []
        for r, _ in got:
            if not times or r["time"] - times[-1] >= APART:
                times.append(r["time"])
        out.append({"row": row, "runs": [r for r, _ in got], "strata": cat(lambda x: x["strata"]),
                    "peer": cat(lambda x: x["peer_value"]), "ratio": cat(lambda x: x.get("ratio")),
                    "cpu": cpu, "conflicts": conf, "times": len(times), "stale": stale, "name": name})
    return out


def cell(s, unit, note):
    if s is None:
        return f"— ({note})" if note else "—"
    txt = num(s["median"], unit) + (f" {unit}" if unit else "")
    if len(s["values"]) > 1:
        txt += f" ({num(s['min'], unit)}–{num(s['max'], unit)})"
    return f"{txt}; {note}" if note else txt


def ratio_txt(q):
    if q is None:
        return "—"
    return f"{q['median']:.2f}×" + (f" ({q['min']:.2f}–{q['max']:.2f})" if len(q["values"]) > 1 else "")


def cpu_txt(c):
    if not c:
        return "—"
    f = lambda s: f"{s['median']:.3g}" if s else "—"
    return f"{f(c['strata'])} / {f(c['peer'])} µs per {c['op']}" if c["peer"] else f"{f(c['strata'])} µs per {c['op']}"


def conflicts_txt(c):
    if not c:
        return "—"
    f = lambda s: num(s["median"], "") if s else "—"
    return f"{f(c['strata'])} / {f(c['peer'])} 409/s" if c["peer"] else f"{f(c['strata'])} 409/s"


def table(rows, refs):
    out = ["| benchmark | strata: median (min–max) | peer: median (min–max) | strata ÷ peer: median (min–max) "
           "| server CPU per operation, strata / peer (median) | conflicts apart, strata / peer (median) | runs |",
           "|---|---|---|---:|---|---|---|"]
    for c in rows:
        row = c["row"]
        peer = "—"
        if row["peer"]:
            peer = row["peer"] + ": " + cell(c["peer"], row.get("peer_unit") or row["unit"], row["peer_note"])
        runs = ", ".join(f"[{refs[r['file']]}]" for r in c["runs"])
        if c["times"] < 2:
            runs += " **one run: range within it only**"
        if c["stale"]:
            runs += f" **stale: src changed since commit {c['stale']}**"
        out.append(f"| {row['benchmark']} | {cell(c['strata'], row['unit'], row['strata_note'])} | {peer} "
                   f"| {ratio_txt(c['ratio'])} | {cpu_txt(c['cpu'])} | {conflicts_txt(c['conflicts'])} | {runs} |")
    out.append("")
    for f, i in sorted(refs.items(), key=lambda x: x[1]):
        r = FILES[f]
        m = r["machine"]
        # a run that lasts until its work is done (bench/eraseab.sh) records no duration
        until_done = r["duration_s"] is None
        per = "each until done" if until_done else f"× {r['duration_s']:g} s per side"
        how = (f"commit {r['commit']}" + (" **with uncommitted changes: not a result**" if r["dirty"] else
                                         " (clean tree)") + f", {r['rounds']} rounds {per}")
        full = until_done or r["duration_s"] >= FULL
        smoke = "" if full and r.get("rounds", FULL_ROUNDS) >= FULL_ROUNDS else (
            " — **smoke run: to be regenerated with a full run**")
        g = r.get("gate")
        if g:
            within = f" over its {g['windows']} runs under the bench lock only" if g.get("windows") else ""
            load = (f"load {m['load_start']:g} → {m['load_end']:g}; gate: load before {g['load_start']:g} "
                    f"(max {g['load_max']:g}), CPU outside the bench {g['foreign_cpu_pct']:g} %{within} "
                    f"(max {g['foreign_max_pct']:g} %), sides in turns, first side alternating")
        else:
            load = (f"load {m['load_start']:g} → {m['load_end']:g}; **not gated** (recorded before the load "
                    f"gate; strata's side ran first in every round)")
        out.append(f"[{i}] `{r['command']}`, {r['date']}, {how}, {m['cores']} cores "
                   f"({m['cpu']}), {m['mem_gib']} GiB, {load}; `{r['file']}`{smoke}  ")
    out[-1] = out[-1].rstrip()
    return "\n".join(out)


FILES = {}


def build(runs, src):
    rows = []
    for name in ORDER:
        if name in runs:
            rows += combine(name, runs[name], src)
    refs = {}
    for c in rows:
        for r in c["runs"]:
            refs.setdefault(r["file"], len(refs) + 1)
            FILES[r["file"]] = r
    return rows, refs


# ---- figures in README's prose ----
def find(rows, refs, name, prefix):
    for c in rows:
        if c["name"] == name and c["row"]["benchmark"].startswith(prefix):
            return c, ", ".join(f"[{refs[r['file']]}]" for r in c["runs"])
    return None, None


def ratio_short(q):
    if q is None:
        return None
    return f"{q['median']:.2f}×" + (f" ({q['min']:.2f}–{q['max']:.2f})" if len(q["values"]) > 1 else "")


def runs_txt(c, ref):
    t = f"run{'s' if len(c['runs']) > 1 else ''} {ref} of the benchmark table"
    if c["times"] < 2:
        t += ", one run"
    if c["stale"]:
        t += f", stale: src changed since commit {c['stale']}"
    return t


def fig_group_ratio(rows, refs):
    incr, ref = find(rows, refs, "cluster", "durable `POST /v1/counters/x/incr`, group of 3")
    post, _ = find(rows, refs, "cluster", "durable 1 KiB message post, group of 3")
    if not incr or not post:
        return "group/one node: see the benchmark table"
    return (f"group/one node {ratio_short(incr['ratio'])} incr, {ratio_short(post['ratio'])} posts "
            f"on 2 cores, {runs_txt(incr, ref)}")


def fig_failover(rows, refs):
    c, ref = find(rows, refs, "cluster", "failover")
    if not c:
        return "failover: see the benchmark table"
    s = c["strata"]
    return (f"failover median {num(s['median'], 'ms')} ms, {num(s['min'], 'ms')}–{num(s['max'], 'ms')} ms over "
            f"{len(s['values'])} runs, {runs_txt(c, ref)}")


def fig_fanout(rows, refs):
    a, ref = find(rows, refs, "streams", "fan-out to 10000 streams, 16")
    b, _ = find(rows, refs, "streams", "fan-out to 10000 streams, 64")
    fa, _ = find(rows, refs, "streams", "fan-out to 10000 streams on a follower of a group of 3, 16")
    fb, _ = find(rows, refs, "streams", "fan-out to 10000 streams on a follower of a group of 3, 64")
    if not a or not b:
        return "fan-out: see the benchmark table"
    t = (f"fan-out {ratio_short(a['ratio'])} / {ratio_short(b['ratio'])} Redis pub/sub's frames/s with 16 / 64 "
         f"changes in flight")
    if fa and fb and fa["ratio"] and fb["ratio"]:
        t += f", on a follower {ratio_short(fa['ratio'])} / {ratio_short(fb['ratio'])}"
    return t + f", {runs_txt(a, ref)}"


def fig_stream_mem(rows, refs):
    c, ref = find(rows, refs, "streams", "memory per idle stream")
    if not c or not c["strata"]:
        return "an idle stream's memory: see the benchmark table"
    s = c["strata"]
    n = re.search(r"at (\d+) streams", c["row"]["benchmark"])
    return (f"an idle stream costs {num(s['median'], 'KiB')} KiB of RSS ({num(s['min'], 'KiB')}–{num(s['max'], 'KiB')})"
            + (f" at {int(n[1]):,} streams" if n else "") + f", {runs_txt(c, ref)}")


FIGS = {"group-ratio": fig_group_ratio, "failover": fig_failover, "fanout": fig_fanout, "stream-mem": fig_stream_mem}


def figures(text, rows, refs, errors):
    def sub(m):
        f = FIGS.get(m[1])
        if not f:
            errors.append(f"<!-- fig:{m[1]} --> names no figure of bench/table.py ({', '.join(FIGS)})")
            return m[0]
        return f"<!-- fig:{m[1]} -->{f(rows, refs)}<!-- /fig -->"
    return FIG.sub(sub, text)


# ---- stray figures ----
# A measured figure typed by hand goes stale unseen. What counts as one: a rate (req/s, frames/s,
# tx/s, writes/s, bookings/s, posts/s, rows/s, answers/s, 2xx/s, any N/s), a time in µs or ms, a
# size in KiB/MiB/GiB/kB/KB/MB/GB, a percentage, a ratio written N×, N.N×, N.NN× or with an x.
STRAY = re.compile(r"(?<![\w.])\d[\d.,]*\s?[kKM]?\s?(?:(?:req|frames|tx|writes|bookings|posts|rows|answers|2xx|ops|calls"
                   r"|messages|changes)/s\b|/s\b)"
                   r"|(?<![\w.])\d[\d.,]*\s?(?:µs|us|ms)\b"
                   r"|(?<![\w.])\d[\d.,]*\s?(?:KiB|MiB|GiB|kB|KB|MB|GB)\b"
                   r"|(?<![\w.])\d[\d.,]*\s?%"
                   r"|(?<![\w.])\d+(?:\.\d+)?(?:×|x\b)")
# README: a figure that sets a limit, a default or a target of the design is not a measurement.
# A rate or a ratio (×, x) is a measurement unless a bound word stands just before it ("at most
# 1.5× …", "target 1.2×" — a target met or missed is then said beside it with its run). A time, a
# size or a percentage is one when a measurement word is near it (MEASURED, in the same sentence)
# and no limit word stands just before it (LIMIT); near: in the same sentence, within 80 characters.
BOUND = re.compile(r"(?:at most|at least|up to|no more than|bound(?:ed by)?|limit|target|within|below|above|under|"
                   r"past|≤|≥|<|>)\s*$", re.I)
LIMIT = re.compile(r"(?:at most|at least|up to|no more than|default|defaults to|every|after|within|above|below|"
                   r"under|over|past|bound|limit|target|timeout|budget|each|about|~|≤|≥|<|>|=|`|\bat)\s*$", re.I)
MEASURED = re.compile(r"\b(?:p50|p99|median|measured|measures|mean|average|took|costs?|CPU|RSS|ran|runs?|"
                      r"answers/s|req/s|bench/\S+\.sh|per (?:answer|request|booking|post|frame|write|op))\b", re.I)
RATE_OR_RATIO = re.compile(r"/s\b|×|x\b")


def blank(text, a, b):
    return text[:a] + re.sub(r"[^\n]", " ", text[a:b]) + text[b:]


def prose(text):
    """text with the generated table, the fig markers and fenced code blocks blanked (lines kept)"""
    a, b = text.find(BEGIN), text.find(END)
    if a >= 0 and b > a:
        text = blank(text, a, b + len(END))
    for m in list(FIG.finditer(text)):
        text = blank(text, m.start(), m.end())
    for m in list(re.finditer(r"^```.*?^```", text, re.S | re.M)):
        text = blank(text, m.start(), m.end())
    return text


def stray_readme(text):
    text = prose(text)
    out = []
    for m in STRAY.finditer(text):
        before = text[max(0, m.start() - 40):m.start()].replace("\n", " ")
        line = text[text.rfind("\n", 0, m.start()) + 1:text.find("\n", m.end())]
        if "`--" in line and line.lstrip().startswith("|"):
            continue  # the flags' table: defaults and limits
        if RATE_OR_RATIO.search(m[0]):
            if BOUND.search(before):
                continue
        else:
            a = max(text.rfind(". ", 0, m.start()), text.rfind("\n\n", 0, m.start()), text.rfind("|", 0, m.start()))
            b = min(x for x in (text.find(". ", m.end()), text.find("\n\n", m.end()), text.find("|", m.end()),
                                len(text)) if x >= 0)
            if LIMIT.search(before) or not MEASURED.search(text[max(a + 1, m.start() - 80):min(b, m.end() + 80)]):
                continue
        n = text.count("\n", 0, m.start()) + 1
        out.append(f"README.md:{n}: a measured figure ({m[0]!r}) outside the table and the <!-- fig --> markers: "
                   "generate it (bench/table.py FIGS), or point to its dated run in bench/RESULTS.md")
    return out


DATE = re.compile(r"\b20\d\d-\d\d-\d\d\b")
COMMAND = re.compile(r"`[^`]*\b(?:bench|tools|build)/[\w./-]+[^`]*`|^    .*\b(?:bench|tools|build)/", re.M)


def other_commits():
    """the commits of the records outside the table (bench/out/bookflat …): RESULTS.md quotes them too"""
    out = set()
    for f in glob.glob(os.path.join(ROOT, "bench", "out", "*", "*.json")):
        if os.path.basename(os.path.dirname(f)) not in ORDER:
            out.add(json.load(open(f))["commit"].split("+")[0])
    return out


def record_numbers():
    """every number in every record under bench/out (values, medians, notes, raw-derived rows)"""
    nums = set()

    def walk(o):
        if isinstance(o, dict):
            for v in o.values():
                walk(v)
        elif isinstance(o, list):
            for v in o:
                walk(v)
        elif isinstance(o, (int, float)) and not isinstance(o, bool):
            nums.add(float(o))
        elif isinstance(o, str):
            for x in re.findall(r"\d[\d,]*(?:\.\d+)?", o):
                try:
                    nums.add(float(x.replace(",", "")))
                except ValueError:
                    pass
    base = os.path.join(ROOT, "bench", "out")
    for d, _, fs in os.walk(base):
        if os.path.relpath(d, base).startswith("raw"):
            continue
        for f in fs:
            if f.endswith(".json"):
                walk(json.load(open(os.path.join(d, f))))
    return nums


def matches(fig, nums, amended):
    """the figure (as shown: 63.5k, 14.1, 1,168) is some record's number, to its shown precision;
    a figure of fewer than 3 significant digits matches nothing"""
    m = re.match(r"(\d[\d,]*(?:\.\d+)?)\s?([kKM]?)", fig)
    if not m:
        return True
    s = m[1].replace(",", "")
    if len(s.replace(".", "").lstrip("0")) < 3:
        return False  # too few digits to tell one record's figure from any other number
    v = float(s)
    dec = len(s.split(".")[1]) if "." in s else 0
    mult = {"k": 1e3, "K": 1e3, "M": 1e6}.get(m[2], 1)
    half = 0.5 * 10 ** -dec * mult + 1e-9
    v *= mult
    return any(abs(v - n) <= half for n in nums | amended)


def stray_results(text, nums, amended, commits):
    """bench/RESULTS.md: a lab notebook. A figure may stand (1) under a dated heading (a YYYY-MM-DD
    in it or in a heading above it) whose section names its command — history, as measured then;
    or (2) anywhere if it matches a figure of a record in bench/out. But a sentence that quotes a
    recorded run (names the commit of a record in bench/out, or "the benchmark table") must match
    a record,
    even under a dated heading: that is a restated table value, and restated values go stale."""
    text = prose(text)
    lines = text.split("\n")
    # per line: is it under a dated heading whose section names a command?
    heads = []  # (level, dated, start line)
    ok = [False] * len(lines)
    sections = []
    for i, l in enumerate(lines):
        m = re.match(r"(#+) ", l)
        if m:
            lvl = len(m[1])
            while heads and heads[-1][0] >= lvl:
                heads.pop()
            heads.append((lvl, bool(DATE.search(l)), i))
        sections.append([h for h in heads])
    for i in range(len(lines)):
        dated = [h for h in sections[i] if h[1]]
        if not dated:
            continue
        lvl, _, start = dated[-1]
        end = next((j for j in range(start + 1, len(lines)) if re.match(r"#{1,%d} " % lvl, lines[j])), len(lines))
        ok[i] = bool(COMMAND.search("\n".join(lines[start:end])))
    words = r"benchmark table\b"
    quote = re.compile(r"\b(?:" + "|".join(map(re.escape, commits)) + r")\b|" + words, re.I) if commits else \
        re.compile(words, re.I)
    out = []
    for m in STRAY.finditer(text):
        n = text.count("\n", 0, m.start())
        # the sentence around the figure
        a = max(text.rfind(". ", 0, m.start()), text.rfind("\n\n", 0, m.start()), text.rfind("|", 0, m.start()))
        b = min(x for x in (text.find(". ", m.end()), text.find("\n\n", m.end()), text.find("|", m.end()), len(text))
                if x >= 0)
        sentence = text[a + 1:b]
        before = text[max(0, m.start() - 40):m.start()].replace("\n", " ")
        if (BOUND if RATE_OR_RATIO.search(m[0]) else LIMIT).search(before):
            continue  # a limit, a default or a target (as in README)
        good = matches(m[0], nums, amended)
        if quote.search(sentence):
            if not good:
                out.append(f"bench/RESULTS.md:{n + 1}: {m[0]!r} quotes a recorded run but matches no record in bench/out "
                           "(a restated table value: generate it, or say which dated run it is from)")
        elif not ok[n] and not good:
            out.append(f"bench/RESULTS.md:{n + 1}: {m[0]!r} is neither under a dated heading whose section names its "
                       "command (history) nor a figure of a record in bench/out")
    return out


STALE_MARK = re.compile(r"(?: \*\*stale: src changed since commit \w+\*\*|, stale: src changed since commit \w+)")


def unmark(text):
    """the text without its stale marks: --check does not fail on them alone (a commit to src/ by
    itself must not turn CI red; the table says so once rewritten)"""
    return STALE_MARK.sub("", text)


def render(path, body, rows, refs, errors):
    text = open(path).read()
    a, b = text.find(BEGIN), text.find(END)
    if a < 0 or b < a:
        sys.exit(f"{path}: markers {BEGIN!r} … {END!r} not found")
    new = text[: a + len(BEGIN)] + "\n" + body + "\n" + text[b:]
    return text, figures(new, rows, refs, errors)


def main():
    check = "--check" in sys.argv[1:]
    runs = load_runs()
    if not runs:
        sys.exit("no bench/out/NAME/*.json: run bench/report.sh (or one of the bench scripts) first")
    errors = []
    for name in ORDER:
        for r in runs.get(name, []):
            for e in gate_errors(r):
                errors.append(f"{r['file']}: {e}: not a result; remove it and run bench/report.sh again on a "
                              "quiet machine (README, Benchmarks: the load gate)")
    if check and git("rev-parse", "--git-dir")[0] != 0:
        # without the history every run reads as stale and the rows draw on other runs: the check
        # would fail on a table that is right
        sys.exit("bench/table.py --check needs git and a clone's .git: which runs a row draws on "
                 "follows from which of them hold the last change to src/ (tools/install-deps.sh "
                 "--test installs git)")
    src = last_src()
    rows, refs = build(runs, src)
    body = table(rows, refs)
    errors += stray_readme(open(os.path.join(ROOT, "README.md")).read())
    amended = set()
    for c in rows:
        for k in ("strata", "peer", "ratio"):
            if c[k]:
                amended |= {float(x) for x in [c[k]["median"], c[k]["min"], c[k]["max"]] + c[k]["values"]}
    commits = sorted({r["commit"].split("+")[0] for rs in runs.values() for r in rs} | other_commits())
    errors += stray_results(open(os.path.join(ROOT, "bench", "RESULTS.md")).read(), record_numbers(), amended, commits)
    stale, marks = [], []
    for f in ("README.md", "bench/RESULTS.md"):
        path = os.path.join(ROOT, f)
        old, new = render(path, body, rows, refs, errors)
        if new != old:
            if not check:
                open(path, "w").write(new)
            elif unmark(new) == unmark(old):
                marks.append(f)  # only the stale marks moved: a commit to src/ since the table was written
            else:
                stale.append(f)
    if marks:
        print(f"{' and '.join(marks)}: some rows became stale (src/ changed since their runs); "
              "python3 bench/table.py marks them, a run on the current code replaces them", file=sys.stderr)
    if stale:
        errors.append(f"{' and '.join(stale)}: the benchmark table or a <!-- fig --> figure differs from "
                      "bench/out/NAME/*.json (run python3 bench/table.py)")
    for e in errors:
        print(e, file=sys.stderr)
    if errors and check:
        sys.exit(1)


if __name__ == "__main__":
    main()
