#!/usr/bin/env bash
# Benchmark: what a cache hit costs (whole process, runtime creation, digest
# check per MiB, lookup, key, and the validation a hit no longer pays).
#
#   scripts/bench-hit-path.sh [HLO file for the key figures] [runs (default 20)]
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x build/bin/hit_path_bench ] || { bash scripts/build.sh >/dev/null; cmake --build build --target hit_path_bench; }
unset NEURON_CC_FLAGS NEURON_COMPILE_CACHE_URL NEURON_EXTRACT_GRAPHS_ONLY
args=()
[ -n "${1:-}" ] && args+=(--module "$1")
args+=(--runs "${2:-20}")
exec build/bin/hit_path_bench "${args[@]}"
