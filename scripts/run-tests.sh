#!/usr/bin/env bash
# Builds npc and runs every test (unit and end-to-end, with a real ninja and a
# real C++ compiler) through ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
cd build
ctest --output-on-failure -j "$(nproc)" "$@"
