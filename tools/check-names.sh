#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Fails when one internal name is defined in more than one file (STYLE.md, "one definition per
# name"): `st__` functions (static or not), static variables, types and struct/union/enum tags,
# and `ST__` macros, across src/ and include/.
# Two files with their own `st__flushed` link fine, but read as one symbol to grep and to a
# debugger.  A file's prototype and its
# definition count once; a header's function prototypes are not definitions and are skipped.
# Prints each duplicated name with its files; exit 1 if there is one.  Takes well under a second.
set -euo pipefail
cd "$(dirname "$0")/.."
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
  exit 1
fi
