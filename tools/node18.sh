#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Prints the path of a Node.js 18 — the one Debian 12's `nodejs` package brings to a fresh
# machine — so the e2e suite runs on what a new user has, even where a newer node is installed
# (a green run on Node 20.19+ hid module-detection failures once).  Uses `node` itself when it
# is 18; otherwise unpacks Debian 12's nodejs + libnode108 into .cache/node18 (no second
# `nodejs` package is installed: the machine's own stays as it is) and installs, from Debian,
# the JavaScript parts that build of node loads from /usr/share/nodejs.
set -euo pipefail
cd "$(dirname "$0")/.."
if command -v node >/dev/null 2>&1 && [[ "$(node --version)" == v18.* ]]; then
  command -v node
  exit 0
fi
dir=$PWD/.cache/node18
if [ ! -x "$dir/node" ] || [[ "$("$dir/node" --version 2>/dev/null)" != v18.* ]]; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq >&2
  $sudo apt-get install -y -qq --no-install-recommends node-acorn node-cjs-module-lexer \
      node-undici libicu72 libc-ares2 libnghttp2-14 libbrotli1 libuv1 >/dev/null
  ver=$(apt-cache madison nodejs | awk -F'|' '$2 ~ /^ *18\./ {gsub(/ /, "", $2); print $2; exit}')
  [ -n "$ver" ] || { echo "node18.sh: Debian's nodejs 18 is not in the package lists" >&2; exit 1; }
  rm -rf "$dir" && mkdir -p "$dir/debs"
  (cd "$dir/debs" && apt-get download -q "nodejs=$ver" "libnode108=$ver" >/dev/null 2>&1)
  for deb in "$dir"/debs/*.deb; do dpkg-deb -x "$deb" "$dir/root"; done
  libdir=$(dirname "$(find "$dir/root" -name 'libnode.so.*' | head -n 1)")
  cat >"$dir/node" <<SH
#!/bin/sh
LD_LIBRARY_PATH="$libdir\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}" exec "$dir/root/usr/bin/node" "\$@"
SH
  chmod +x "$dir/node"
fi
"$dir/node" --version >&2
echo "$dir/node"
