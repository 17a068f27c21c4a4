#!/usr/bin/env bash
# Benchmark: the canonical graph key (npc::hlo::CanonicalGraphKey) of the
# largest HLO modules of the corpus (../shared/corpus) or of the given files
# and folders. Prints, per module, its serialized size, the best and median
# time of a key and the median per MB of serialized module. Measures, asserts
# nothing.
#
#   scripts/bench-graph-key.sh [--iterations N] [--top K] [paths...]
set -euo pipefail
cd "$(dirname "$0")/.."
[ -f build/build.ninja ] || bash scripts/build.sh
cmake --build build --target bench_graph_key >/dev/null
exec build/bin/bench_graph_key "$@"
