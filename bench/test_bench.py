#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# Tests of what the benchmark figures rest on (the tracker issue "Trust", "Figures that mislead"):
# bench/table.py's rules on throw-away trees (records over runs, the load gate, staleness from
# git, stray figures in README and bench/RESULTS.md), bookings counted as wins, bench/lib.sh's
# alternating turns, the bookflat record. Run by tools/test.sh: python3 bench/test_bench.py
import glob, json, os, re, shutil, subprocess, sys, tempfile, unittest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
BEGIN = "<!-- bench-table:begin (written by bench/table.py from bench/out/*.json; do not edit by hand) -->"
END = "<!-- bench-table:end -->"


def read(p):
    with open(p) as f:
        return f.read()


def stats(v):
    import statistics
    return {"median": statistics.median(v), "min": min(v), "max": max(v), "values": v}


def record(date, commit, s, p, fmt=3, load=0.2, foreign=1.0, name="run", dirty=False):
    r = {"format": fmt, "name": name, "command": f"bench/{name}.sh", "date": date,
         "machine": {"host": "t", "cores": 2, "cpu": "x", "mem_gib": 1, "kernel": "k", "load_start": load,
                     "load_end": 2.0},
         "commit": commit, "dirty": dirty, "duration_s": 10.0, "rounds": len(s),
         "rows": [{"benchmark": "durable `POST /v1/counters/x/incr`", "unit": "req/s", "strata": stats(s),
                   "strata_note": "", "peer": "Redis", "peer_value": stats(p), "peer_note": "", "peer_unit": "req/s",
                   "ratio": stats([round(a / b, 4) for a, b in zip(s, p)]), "cpu_us_per_op": None}]}
    if fmt >= 3:
        r["gate"] = {"load_max": 1.0, "load_start": load, "foreign_cpu_pct": foreign, "foreign_max_pct": 10.0,
                     "steal_pct": 0.0}
        r["loaded"] = False
    return r


class Tree:
    """a throw-away git repository with bench/table.py, a README and a RESULTS.md with the markers"""

    def __init__(self, readme="", results=""):
        self.d = tempfile.mkdtemp(prefix="strata-table-")
        os.makedirs(os.path.join(self.d, "bench", "out"))
        os.makedirs(os.path.join(self.d, "src"))
        shutil.copy(os.path.join(ROOT, "bench", "table.py"), os.path.join(self.d, "bench"))
        self.write("README.md", f"# t\n\n{readme}\n\n{BEGIN}\n{END}\n")
        self.write("bench/RESULTS.md", f"# r\n\n{BEGIN}\n{END}\n\n{results}\n")
        self.write("src/a.c", "int a;\n")
        self.git("init", "-q")
        self.commit("first")

    def write(self, path, text):
        p = os.path.join(self.d, path)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        open(p, "w").write(text)

    def git(self, *a):
        return subprocess.run(["git", "-C", self.d, "-c", "user.email=t@t", "-c", "user.name=t", *a],
                              capture_output=True, text=True, check=True).stdout.strip()

    def commit(self, msg):
        self.git("add", "-A")
        self.git("commit", "-qm", msg, "--allow-empty")
        return self.git("rev-parse", "--short", "HEAD")

    def add(self, r):
        name = r["name"]
        self.write(f"bench/out/{name}/{r['date'].replace(' ', 'T').replace(':', '')}.json", json.dumps(r))

    def table(self, *a):
        return subprocess.run([sys.executable, os.path.join(self.d, "bench", "table.py"), *a], cwd=self.d,
                              capture_output=True, text=True)

    def readme(self):
        return read(os.path.join(self.d, "README.md"))

    def close(self):
        shutil.rmtree(self.d)


class TableRules(unittest.TestCase):
    def setUp(self):
        self.t = Tree()

    def tearDown(self):
        self.t.close()

    def row(self):
        return next(l for l in self.t.readme().splitlines() if l.startswith("| durable"))

    def test_range_spans_runs_at_different_times(self):
        c = self.t.git("rev-parse", "--short", "HEAD")
        self.t.add(record("2026-11-28 06:00 UTC", c, [100, 110, 120], [100, 100, 100]))
        self.t.add(record("2026-11-28 09:00 UTC", c, [200, 210, 220], [100, 100, 100]))
        self.assertEqual(self.t.table().returncode, 0)
        row = self.row()
        self.assertIn("(100–220)", row)  # both runs' rounds
        self.assertIn("1.60× (1.00–2.20)", row)  # the median of the six rounds' ratios
        self.assertIn("[1], [2]", row)
        self.assertNotIn("one run", row)
        self.assertEqual(self.t.table("--check").returncode, 0, self.t.table("--check").stderr)

    def test_one_run_says_so(self):
        c = self.t.git("rev-parse", "--short", "HEAD")
        self.t.add(record("2026-11-28 06:00 UTC", c, [100, 110, 120], [100, 100, 100]))
        self.t.add(record("2026-11-28 06:20 UTC", c, [100, 110, 120], [100, 100, 100]))  # the same hour
        self.t.table()
        self.assertIn("one run", self.row())

    def test_loaded_record_is_refused(self):
        c = self.t.git("rev-parse", "--short", "HEAD")
        self.t.add(record("2026-11-28 06:00 UTC", c, [100], [100], load=3.0))
        self.t.table()
        r = self.t.table("--check")
        self.assertEqual(r.returncode, 1)
        self.assertIn("loaded machine: 1-minute load 3", r.stderr)

    def test_foreign_cpu_is_refused(self):
        c = self.t.git("rev-parse", "--short", "HEAD")
        self.t.add(record("2026-11-28 06:00 UTC", c, [100], [100], foreign=35.0))
        self.t.table()
        r = self.t.table("--check")
        self.assertEqual(r.returncode, 1)
        self.assertIn("CPU outside the bench 35", r.stderr)

    def test_dirty_record_is_refused(self):
        c = self.t.git("rev-parse", "--short", "HEAD")
        self.t.add(record("2026-11-28 06:00 UTC", c, [100], [100], dirty=True))
        self.t.table()
        self.assertEqual(self.t.table("--check").returncode, 1)

    def test_change_to_src_marks_stale_and_does_not_fail(self):
        c = self.t.git("rev-parse", "--short", "HEAD")
        self.t.add(record("2026-11-28 06:00 UTC", c, [100, 110, 120], [100, 100, 100]))
        self.t.table()
        self.t.commit("table")
        self.assertEqual(self.t.table("--check").returncode, 0)
        self.assertNotIn("stale", self.row())
        # another engineer's commit to src/ lands: the row says so, --check still passes once the
        # table is rewritten (and the check itself names only the table differing, not an error)
        self.t.write("src/a.c", "int a, b;\n")
        self.t.commit("src change")
        r = self.t.table("--check")  # CI on main after that commit, the table not rewritten
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("became stale", r.stderr)
        self.t.table()
        self.assertIn(f"stale: src changed since commit {c}", self.row())
        self.assertIn("110 req/s (100–120)", self.row())  # the same runs, the same figures
        self.assertEqual(self.t.table("--check").returncode, 0)
        # a run on the new code replaces the stale ones in the row
        n = self.t.git("rev-parse", "--short", "HEAD")
        self.t.add(record("2026-11-28 12:00 UTC", n, [300, 300, 300], [100, 100, 100]))
        self.t.table()
        self.assertNotIn("stale", self.row())
        self.assertIn("300 req/s", self.row())
        # a figure that changes (not only a mark) still fails --check until the table is rewritten
        self.t.add(record("2026-11-28 15:00 UTC", n, [400, 400, 400], [100, 100, 100]))
        self.assertEqual(self.t.table("--check").returncode, 1)

    def test_ungated_legacy_record_is_marked(self):
        c = self.t.git("rev-parse", "--short", "HEAD")
        self.t.add(record("2026-11-28 06:00 UTC", c, [100], [100], fmt=2, load=9.0))
        self.t.table()
        self.assertIn("**not gated**", self.t.readme())
        self.assertEqual(self.t.table("--check").returncode, 0)


class StrayFigures(unittest.TestCase):
    def check(self, readme="", results=""):
        t = Tree(readme, results)
        c = t.git("rev-parse", "--short", "HEAD")
        t.add(record("2026-11-28 06:00 UTC", c, [63450, 60933], [51583, 52576]))
        t.table()
        r = t.table("--check")
        t.close()
        return r.stderr

    def test_readme_measurements_are_caught(self):
        for fig in ("strata runs 61.4k posts/s here", "it does 12,000 rows/s", "23.5k answers/s",
                    "a p99 of 3 ms in that run", "the median was 14.1 µs per answer", "RSS grew 250 MB in that run",
                    "the run moved it 9 %", "the ratio is 2.65x", "bookings 1.3× Redis", "fan-out 2× Redis"):
            self.assertIn("README.md:3", self.check(readme=fig), fig)

    def test_readme_limits_pass(self):
        for fig in ("content up to 1 MiB", "a timeout of `--x` (default 30 ms)", "at most 1.5× the bytes",
                    "the heartbeat is at least 5 ms", "segments of about 64 MiB"):
            self.assertEqual(self.check(readme=fig), "", fig)

    def test_results_history_needs_a_dated_heading_with_its_command(self):
        hist = "## Session 1 (2026-11-20)\n\n    bench/cost.sh a b\n\nold 41,789 answers/s, 14.46 µs.\n"
        self.assertEqual(self.check(results=hist), "")
        undated = "## Notes\n\nold 41,789 answers/s, 14.46 µs.\n"
        self.assertIn("neither under a dated heading", self.check(results=undated))
        nocmd = "## Session 1 (2026-11-20)\n\nold 41,789 answers/s, 14.46 µs.\n"
        self.assertIn("neither under a dated heading", self.check(results=nocmd))

    def test_results_restated_record_must_match(self):
        t = Tree()
        c = t.git("rev-parse", "--short", "HEAD")
        t.close()
        ok = f"## S (2026-11-28)\n\n`bench/run.sh`\n\nThe run of {c} shows 63.5k req/s.\n"
        bad = f"## S (2026-11-28)\n\n`bench/run.sh`\n\nThe run of {c} shows 72.9k req/s.\n"
        # the commit differs between trees: name it through the record's own commit instead
        for text, want in ((ok, ""), (bad, "quotes a recorded run")):
            t = Tree(results="")
            c = t.git("rev-parse", "--short", "HEAD")
            t.add(record("2026-11-28 06:00 UTC", c, [63450, 60933], [51583, 52576]))
            t.write("bench/RESULTS.md", read(os.path.join(t.d, "bench/RESULTS.md"))
                    + text.replace(text.split("The run of ")[1].split(" ")[0], c))
            t.table()
            err = t.table("--check").stderr
            t.close()
            self.assertIn(want, err) if want else self.assertEqual(err, "")


class Bookings(unittest.TestCase):
    def test_recorded_bookings_count_wins(self):
        import table
        runs = table.load_runs()
        seats = runs["seats"]
        for r in seats:
            for row in r["rows"]:
                if row["benchmark"].startswith("durable booking"):
                    self.assertEqual(row["unit"], "bookings won/s")
                    self.assertTrue(row.get("conflicts_per_s"), "conflicts in their own column")
        # the b4077bb record: 1.11× Redis always and 0.93× everysec counting wins (1.27× and 0.84×
        # when conflicts counted as throughput)
        old = [r for r in seats if r["commit"] == "b4077bb"]
        if old:
            q = {("always" in row["peer"]): round(row["ratio"]["median"], 2) for row in old[0]["rows"]
                 if row["benchmark"].startswith("durable booking")}
            self.assertEqual(q, {True: 1.11, False: 0.93})

    def test_seats_sh_counts_wins(self):
        s = read(os.path.join(ROOT, "bench", "seats.sh"))
        self.assertNotIn("W_RPS + W_EXP_RPS", s)
        self.assertIn('"bookings won/s"', s)
        # the Lua script's count of wins is the same since its first version: booking:seq
        self.assertIn("GET booking:seq", s)


class Turns(unittest.TestCase):
    def test_first_side_alternates(self):
        lib = read(os.path.join(ROOT, "bench", "lib.sh"))
        m = re.search(r"^turns\(\) \{.*?^\}", lib, re.S | re.M)
        self.assertTrue(m, "bench/lib.sh has turns()")
        sh = m[0] + '\na() { echo -n "a$1 "; }; b() { echo -n "b$1 "; }; c() { echo -n "c$1 "; }\n' \
            'for r in 1 2 3; do turns $r a b c; done; echo; for r in 1 2; do turns $r a b; done\n'
        out = subprocess.run(["bash", "-c", sh], capture_output=True, text=True).stdout.split("\n")
        self.assertEqual(out[0].split(), ["a1", "b1", "c1", "b2", "c2", "a2", "c3", "a3", "b3"])
        self.assertEqual(out[1].split(), ["a1", "b1", "b2", "a2"])

    def test_ab_rounds_alternates_old_and_new(self):
        # bench/tablescommit.sh, tablesroute.sh, tickcost.sh: `measure ROUND SIDE` through ab_rounds
        lib = read(os.path.join(ROOT, "bench", "lib.sh"))
        fns = [re.search(r"^%s\(\) \{.*?^\}" % f, lib, re.S | re.M) for f in ("turns", "turns_of", "ab_rounds")]
        self.assertTrue(all(fns), "bench/lib.sh has turns(), turns_of() and ab_rounds()")
        sh = "\n".join(m[0] for m in fns) + '\nmeasure() { echo -n "$2$1 "; }; ROUNDS=3; ab_rounds; echo\n'
        out = subprocess.run(["bash", "-c", sh], capture_output=True, text=True).stdout
        self.assertEqual(out.split(), ["old1", "new1", "new2", "old2", "old3", "new3"])
        for s in ("tablescommit", "tablesroute", "tickcost"):
            self.assertIn("ab_rounds", read(os.path.join(ROOT, "bench", s + ".sh")), s)

    def test_scripts_use_turns(self):
        for s in ("run", "seats", "chat", "streams", "cluster", "auth", "bigroom", "notifyab", "eraseab", "keyedcost"):
            self.assertIn("turns \"$round\"", read(os.path.join(ROOT, "bench", s + ".sh")), s)


class RowRatio(unittest.TestCase):
    """bench/lib.sh's row: a ratio for rates, and for a time or size row only when the row asks
    for it (RATIO "ratio", bench/bigroom.sh) with the same unit on both sides"""

    def record(self, rows):
        lib = read(os.path.join(ROOT, "bench", "lib.sh"))
        body = lib.split("out_write() {", 1)[1]
        py = body.split("<<'PY'\n", 1)[1].split("\nPY\n", 1)[0]
        d = tempfile.mkdtemp()
        try:
            with open(os.path.join(d, "rows.tsv"), "w") as f:
                for r in rows:
                    f.write("\t".join(r) + "\n")
            out = subprocess.run([sys.executable, "-", "t", "cmd", os.path.join(d, "rows.tsv"), "0.1", "0.2", "0",
                                  "1", "1", "10", "0", "0", "raw", ""], input=py, capture_output=True, text=True,
                                 cwd=ROOT, check=True).stdout
        finally:
            shutil.rmtree(d)
        return {x["benchmark"]: x["ratio"] for x in json.loads(out)["rows"]}

    def test_ratio_only_where_it_means_something(self):
        p = "peer"
        got = self.record([
            ["rate", "10 20", "req/s", "", p, "5 10", ""],
            ["time asked", "30 60", "ms", "", p, "60 60", "", "", "", "", "", "", "", "ratio"],
            ["time not asked", "30 60", "ms", "", p, "60 60", ""],
            ["units differ", "30 60", "ms", "", p, "60 60", "", "s", "", "", "", "", "", "ratio"],
        ])
        self.assertEqual(got["rate"]["values"], [2.0, 2.0])
        self.assertEqual(got["time asked"]["values"], [0.5, 1.0])
        self.assertIsNone(got["time not asked"])
        self.assertIsNone(got["units differ"])


class NewRows(unittest.TestCase):
    """bench/notifyab.sh's old binary's rows stay out of the table; bench/eraseab.sh's record (no
    duration: each run lasts until its erasure is done; the gate over its runs under the lock)
    reads as a full run with its windows said"""

    def setUp(self):
        self.t = Tree()

    def tearDown(self):
        self.t.close()

    def test_notifyab_shows_the_new_binary_only(self):
        c = self.t.git("rev-parse", "--short", "HEAD")
        r = record("2026-11-28 06:00 UTC", c, [5, 6, 7], [7, 7, 7], name="notifyab")
        new = r["rows"][0]
        new["benchmark"], new["unit"], new["peer"] = "notify: p99_ms (new)", "ms", "Redis 7 pub/sub"
        old = json.loads(json.dumps(new))
        old["benchmark"] = "notify: p99_ms (old)"
        r["rows"] = [new, old]
        self.t.add(r)
        self.assertEqual(self.t.table().returncode, 0)
        t = self.t.readme()
        self.assertIn("| notify: p99_ms (new) |", t)
        self.assertNotIn("(old)", t)
        self.assertEqual(self.t.table("--check").returncode, 0)

    def test_until_done_record_with_gate_windows(self):
        c = self.t.git("rev-parse", "--short", "HEAD")
        r = record("2026-11-28 06:00 UTC", c, [3, 4, 5], [4, 5, 6], name="eraseab")
        r["duration_s"] = None
        r["gate"]["windows"] = 6
        r["rows"][0].update({"benchmark": "erasure: done in", "unit": "s", "peer_unit": "s"})
        self.t.add(r)
        self.assertEqual(self.t.table().returncode, 0)
        t = self.t.readme()
        self.assertIn("| erasure: done in | 4 s (3–5)", t)
        self.assertIn("3 rounds each until done", t)
        self.assertIn("over its 6 runs under the bench lock only", t)
        self.assertNotIn("smoke run", t)
        self.assertEqual(self.t.table("--check").returncode, 0)

    def test_gate_windows_in_lib(self):
        # out_write judges the windows' sum when gate_hold … gate_release bound them
        lib = read(os.path.join(ROOT, "bench", "lib.sh"))
        for f in ("gate_hold", "gate_release", "bench_on_exit"):
            self.assertRegex(lib, r"(?m)^%s\(\) \{" % f)
        self.assertIn("gate_release", read(os.path.join(ROOT, "bench", "eraseab.sh")))


class Bookflat(unittest.TestCase):
    def test_record_with_a_second_cycle_and_results_quote_it(self):
        recs = sorted(glob.glob(os.path.join(ROOT, "bench", "out", "bookflat", "*.json")))
        self.assertTrue(recs, "bench/out/bookflat/DATE.json: run bench/bookflat.sh")
        r = json.load(open(recs[-1]))
        b = r["bookflat"]
        for k in ("small", "large", "large_second_cycle"):
            self.assertIn("strata_hot_bytes", b[k])
            self.assertIn("data_mdb_bytes", b[k])
        self.assertFalse(r["dirty"])
        self.assertTrue(os.path.isdir(os.path.join(ROOT, r["raw"])), "the raw output is kept")
        res = read(os.path.join(ROOT, "bench", "RESULTS.md"))
        self.assertIn(os.path.relpath(recs[-1], ROOT), res, "RESULTS.md names the record")
        self.assertIn(r["command"], res, "RESULTS.md gives the exact command")


class Records(unittest.TestCase):
    def test_new_records_are_not_ignored_by_git(self):
        for f in ("bench/out/seats/2030-01-01T000000Z.json", "bench/out/raw/seats/2030-01-01T000000Z/1-strata-book.txt",
                  "bench/out/bookflat/2030-01-01T000000Z.json"):
            r = subprocess.run(["git", "-C", ROOT, "check-ignore", "-q", f])
            self.assertEqual(r.returncode, 1, f"{f} is ignored by .gitignore: a run's record would not be committed")


class Claims(unittest.TestCase):
    def test_readme_claims_the_issue_found_false_are_gone(self):
        t = read(os.path.join(ROOT, "README.md"))
        self.assertNotIn("does not depend on who else runs", t)
        self.assertNotIn("toward 1.2×", t)
        self.assertNotIn("with an ES256 token (JWKS) on every request", t)
        self.assertNotIn("bench/out/NAME.json", t)


if __name__ == "__main__":
    unittest.main(verbosity=1)
