#!/usr/bin/env bash
# Benchmarks of libnpc_pjrt.so with an unmodified JAX script (tests/jax/train.py):
#  1. time to the first training step: cold cache (JIT through the plugin: every graph a
#     miss compiled by XLA), plain JAX CPU (its own JIT), and after neuron_parallel_compile
#     (every graph a hit); the ratio cold / warm;
#  2. the trial run (NEURON_EXTRACT_GRAPHS_ONLY=1) against the cold JIT run;
#  3. the plugin's overhead per execution against the inner plugin registered directly
#     (tests/jax/bench_exec.py).
# Usage: bash scripts/bench-pjrt-plugin.sh [build dir]   (needs scripts/install-pjrt.sh --jax)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$here/build}" && pwd)
py="$build/pjrt-venv/bin/python3"
plugin="$build/lib/libnpc_pjrt.so"
inner=$(ls "$build"/pjrt-venv/lib/python3*/site-packages/xla_plugins/xla_cpu_pjrt/xla_cpu_pjrt.so 2>/dev/null | head -1)
if [[ ! -x "$py" || ! -f "$plugin" || -z "$inner" ]] || ! "$py" -c "import jax" 2>/dev/null; then
  echo "bench-pjrt-plugin: skipped: needs $plugin and jax in $build/pjrt-venv (scripts/install-pjrt.sh --jax)"
  exit 0
fi
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
export PJRT_NAMES_AND_LIBRARY_PATHS="npc:$plugin" NPC_BACKEND=pjrt NEURON_CC_FLAGS=""
first_step() { grep '^first_step_seconds' | awk '{print $2}'; }
steps=20

cold=$(JAX_PLATFORMS=npc NEURON_COMPILE_CACHE_URL="$tmp/cold" "$py" "$here/tests/jax/train.py" --steps $steps 2>/dev/null | first_step)
plain=$(JAX_PLATFORMS=cpu "$py" "$here/tests/jax/train.py" --steps $steps 2>/dev/null | first_step)
t0=$(date +%s.%N)
JAX_PLATFORMS=npc NEURON_COMPILE_CACHE_URL="$tmp/trial" NEURON_EXTRACT_GRAPHS_ONLY=1 \
  "$py" "$here/tests/jax/train.py" --steps 3 >/dev/null 2>&1
t1=$(date +%s.%N)
JAX_PLATFORMS=npc NEURON_COMPILE_CACHE_URL="$tmp/cold3" "$py" "$here/tests/jax/train.py" --steps 3 >/dev/null 2>&1
t2=$(date +%s.%N)
JAX_PLATFORMS=npc NEURON_COMPILE_CACHE_URL="$tmp/warm" "$build/bin/neuron_parallel_compile" \
  "$py" "$here/tests/jax/train.py" --steps 3 >/dev/null 2>&1
t3=$(date +%s.%N)
warm=$(JAX_PLATFORMS=npc NEURON_COMPILE_CACHE_URL="$tmp/warm" "$py" "$here/tests/jax/train.py" --steps $steps 2>/dev/null | first_step)
echo "time to first step, cold cache (JIT through the plugin): ${cold} s"
echo "time to first step, plain JAX CPU (its own JIT):         ${plain} s"
echo "time to first step after neuron_parallel_compile:        ${warm} s"
awk -v c="$cold" -v w="$warm" -v p="$plain" 'BEGIN {printf "warm-start ratio: %.1fx against the cold plugin run, %.1fx against plain JAX\n", c / w, p / w}'
awk -v a="$t0" -v b="$t1" -v c="$t2" -v d="$t3" 'BEGIN {printf "train.py --steps 3 wall: trial run (extract, cheap compiles) %.2f s, cold JIT run %.2f s (%.2fx); neuron_parallel_compile (trial + ninja) %.2f s\n", b - a, c - b, (c - b) / (b - a), d - c}'

through=$(JAX_PLATFORMS=npc NEURON_COMPILE_CACHE_URL="$tmp/exec" "$py" "$here/tests/jax/bench_exec.py" 2>/dev/null | awk '/exec_us_per_call/ {print $2}')
direct=$(PJRT_NAMES_AND_LIBRARY_PATHS="inner:$inner" JAX_PLATFORMS=inner "$py" "$here/tests/jax/bench_exec.py" 2>/dev/null | awk '/exec_us_per_call/ {print $2}')
echo "per execution: ${through} us through libnpc_pjrt.so, ${direct} us with the inner plugin alone"
awk -v a="$through" -v b="$direct" 'BEGIN {printf "plugin overhead per execution: %.2f us (%.1f%%)\n", a - b, (a - b) / b * 100}'
