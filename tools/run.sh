#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# One command from a fresh Debian 12 to a running strata: installs what is missing, builds, and
# starts it on its embedded defaults (LMDB in ./data, cold tier in ./data/cold, 127.0.0.1:8080).
# Extra arguments go to strata, e.g. tools/run.sh --listen 0.0.0.0:8080
set -euo pipefail
cd "$(dirname "$0")/.."
tools/install-deps.sh
tools/build.sh release
exec build/strata "$@"
