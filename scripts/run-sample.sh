#!/usr/bin/env bash
# The main job on the embedded default: build npc and the sample trainer, run
# the trial run + parallel compile with the host backend, then the real run,
# which finds every graph in the cache.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
cache="${NEURON_COMPILE_CACHE_URL:-$PWD/build/neuron-compile-cache}"
export NEURON_COMPILE_CACHE_URL="$cache"
echo "== trial run + parallel compile (cache: $cache)"
./build/bin/neuron_parallel_compile ./build/samples/mlp_train --steps 10
echo "== real run"
./build/samples/mlp_train --steps 300
