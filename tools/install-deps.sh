#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Installs every Debian package strata needs to build, run and test. Idempotent: packages that
# are already present are skipped, so this is cheap to call before every build.
#   tools/install-deps.sh            build + run dependencies
#   tools/install-deps.sh --test     + test tools (Node.js/npm for e2e clients, clang for fuzzing)
#   tools/install-deps.sh --bench    + benchmark peers (redis, nginx, postgresql, wrk)
set -euo pipefail

pkgs=(build-essential cmake pkg-config ca-certificates
      libuv1-dev liblmdb-dev node-llhttp libwebsockets-dev libwebsockets-evlib-uv
      libcjson-dev libzstd-dev libcurl4-openssl-dev libssl-dev zlib1g-dev libraft-dev liburing-dev libjemalloc-dev
      curl) # not to build: the README's examples talk to strata with curl --json
for arg in "$@"; do
  case "$arg" in
    --test) pkgs+=(clang libclang-rt-14-dev curl openssl) # openssl: the S3 HTTPS test makes a CA
            # browser (CORS) test, three strata behind nginx and HAProxy, /metrics checked by promtool
            pkgs+=(chromium nginx-light haproxy prometheus)
            # the Jepsen-style test: members in network namespaces, links cut with iptables
            pkgs+=(iproute2 iptables)
            # the disk-full and store-failure tests: a loop-mounted ext4 (mkfs.ext4, mount) and
            # python3 for the EXT4_IOC_SHUTDOWN ioctl; python3 also checks the README's benchmark
            # table against the recorded runs (bench/table.py)
            pkgs+=(e2fsprogs mount python3)
            # bench/table.py --check reads the history (which runs hold the last change to src/)
            pkgs+=(git)
            # the Python client (clients/python): its dependencies, pytest, mypy, and what
            # `pip install` of it in a venv needs
            pkgs+=(python3-httpx python3-websockets python3-pytest mypy python3-venv
                   python3-setuptools python3-pip)
            # e2e tests run on Node (node:test) with two npm packages, DuckDB and s3rver:
            # Debian's nodejs (18) and npm are enough; a newer node already here is used as it is.
            command -v node >/dev/null 2>&1 || pkgs+=(nodejs)
            command -v npm >/dev/null 2>&1 || pkgs+=(npm) ;;
    --bench) pkgs+=(redis-server redis-tools nginx-light postgresql wrk procps curl python3) ;;
    *) echo "unknown option: $arg" >&2; exit 2 ;;
  esac
done

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
echo "installing: ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
