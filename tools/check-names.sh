#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Fails when one internal name is defined in more than one file (STYLE.md, "one definition per
# name"): `st__` functions (static or not), static variables, types and struct/union/enum tags,
# and `ST__` macros, across src/ and include/.
# Two files with their own `st__flushed` link fine, but read as one symbol to grep and to a
# debugger.  A file's prototype and its
# definition count once; a header's function prototypes are not definitions and are skipped.
# It also keeps the code's shape (STYLE.md, issue 46): no file of src/ or include/ over
# ST_MAX_FILE_LINES (800) lines, and no function of src/ over ST_MAX_FN_LINES (150) lines but
# main (a function runs from a "{" in column 0 to the next "}" in column 0, as clang-format lays
# them out).
# Prints each duplicated name with its files, each long file and function; exit 1 if there is
# one.  Takes well under a second.
# And it fails on a use of libuv's async handles (see the end).
set -euo pipefail
cd "$(dirname "$0")/.."
max_file=${ST_MAX_FILE_LINES:-800}
max_fn=${ST_MAX_FN_LINES:-150}
status=0
dups=$(find src include -name '*.[ch]' -print0 | sort -z | xargs -0 awk '
function add(name) { if (!((name, FILENAME) in seen)) { seen[name, FILENAME] = 1; files[name] = files[name] " " FILENAME; count[name]++ } }
function all(s, re) { while (match(s, re)) { add(substr(s, RSTART, RLENGTH)); s = substr(s, RSTART + RLENGTH) } }
# macros: "#define ST__X" (an #if/#else pair of one macro in one file counts once)
/^#[ \t]*define[ \t]+ST__[A-Z0-9_]+/ { match($0, /ST__[A-Z0-9_]+/); add(substr($0, RSTART, RLENGTH)); next }
/^[#\/ \t*]/ { next }                              # preprocessor, comments, indented lines
# types: "} st__x_t;", "typedef ... st__x_t;", "struct st__x {"
/^}[ \t]*st__[a-z0-9_]+[ \t]*;/ { all($0, "st__[a-z0-9_]+"); next }
/^typedef[^(]*[ *]st__[a-z0-9_]+[ \t]*;/ { s = $0; sub(/;.*/, "", s); match(s, /st__[a-z0-9_]+[ \t]*$/); add(substr(s, RSTART, RLENGTH)); next }
/^(typedef[ \t]+)?(struct|union|enum)[ \t]+st__[a-z0-9_]+[ \t]*\{/ { match($0, /st__[a-z0-9_]+/); add(substr($0, RSTART, RLENGTH)); next }
# functions: the name before the first "(" at the top level; in a header only static inline ones
{
    p = index($0, "(")
    if (p > 0) {
        head = substr($0, 1, p - 1)
        if (head ~ /(^|[ *])st__[a-z0-9_]+$/ && head !~ /=/ && (FILENAME ~ /\.c$/ || head ~ /^static/)) {
            match(head, /st__[a-z0-9_]+$/); add(substr(head, RSTART, RLENGTH)); next
        }
    }
}
# static variables: every st__ name declared before the initialiser
/^static[ \t]/ { s = $0; sub(/=.*/, "", s); if (index(s, "(") == 0) all(s, "st__[a-z0-9_]+") }
END {
    for (n in count) if (count[n] > 1) print n ":" files[n]
}' | sort)
if [ -n "$dups" ]; then
  echo "tools/check-names.sh: internal names defined in more than one file (rename each for what it does in its file):" >&2
  echo "$dups" >&2
  status=1
fi

long_files=$(find src include -name '*.[ch]' -print0 | sort -z | xargs -0 awk -v max="$max_file" '
FNR == 1 && NR > 1 && n > max { print prev_file ": " n " lines" }
FNR == 1 { n = 0 }
{ n = FNR; prev_file = FILENAME }
END { if (n > max) print prev_file ": " n " lines" }')
if [ -n "$long_files" ]; then
  echo "tools/check-names.sh: files over $max_file lines (split each by concern, STYLE.md):" >&2
  echo "$long_files" >&2
  status=1
fi

long_fns=$(find src -name '*.c' -print0 | sort -z | xargs -0 awk -v max="$max_fn" '
FNR == 1 { start = 0 }
/^\{/ { start = FNR; head = prev }
/^\}/ && start {
    if (FNR - start + 1 > max && head !~ /(^|[ *])main\(/) print FILENAME ":" start ": " FNR - start + 1 " lines: " head
    start = 0
}
{ prev = $0 }')
if [ -n "$long_fns" ]; then
  echo "tools/check-names.sh: functions over $max_fn lines (split each by step, STYLE.md):" >&2
  echo "$long_fns" >&2
  status=1
fi

# A uv_async_t makes the loop spin while a preempted sender finishes its send (libuv 1.44,
# include/strata/wake.h): strata's threads wake the loop through core/wake.c instead.
spins=$(grep -rnE '\buv_async_(send|init)\(' src include | grep -vE '^[^:]+:[0-9]+:[[:space:]]*(/?\*)' || true)
if [ -n "$spins" ]; then
  echo "tools/check-names.sh: uv_async_* used: take st_wake_t (strata/wake.h):" >&2
  echo "$spins" >&2
  status=1
fi
exit $status
