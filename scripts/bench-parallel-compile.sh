#!/usr/bin/env bash
# Benchmark: one set of HLO modules compiled with the host backend one at a
# time (--num_parallel 1: what a training program's first run does, graph
# after graph) and through the Ninja pool (--num_parallel <jobs>). Prints both
# wall times and their ratio, measured in this one run, and checks that both
# caches hold byte-identical artifacts.
#
#   scripts/bench-parallel-compile.sh [modules (default 16)] [jobs (default: CPU count)]
set -euo pipefail
cd "$(dirname "$0")/.."
modules="${1:-16}"
jobs="${2:-$(nproc)}"
[ -x build/bin/npc ] || bash scripts/build.sh
npc="$PWD/build/bin/npc"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
unset NEURON_CC_FLAGS NEURON_COMPILE_CACHE_URL

# Module i: a 64x64 dense layer followed by a chain of elementwise ops with
# constants that differ per module (so every module is its own cache entry).
mkdir -p "$work/hlo"
for i in $(seq 1 "$modules"); do
  {
    echo "HloModule bench_$i"
    echo
    echo "ENTRY %main (x: f32[64,64], w: f32[64,64]) -> f32[64,64] {"
    echo "  %x = f32[64,64]{1,0} parameter(0)"
    echo "  %w = f32[64,64]{1,0} parameter(1)"
    echo "  %v0 = f32[64,64]{1,0} dot(f32[64,64]{1,0} %x, f32[64,64]{1,0} %w), lhs_contracting_dims={1}, rhs_contracting_dims={0}"
    for k in $(seq 1 40); do
      echo "  %c$k = f32[] constant($i.$k)"
      echo "  %b$k = f32[64,64]{1,0} broadcast(f32[] %c$k), dimensions={}"
      echo "  %m$k = f32[64,64]{1,0} multiply(f32[64,64]{1,0} %v$((k - 1)), f32[64,64]{1,0} %b$k)"
      echo "  %v$k = f32[64,64]{1,0} tanh(f32[64,64]{1,0} %m$k)"
    done
    echo "  ROOT %out = f32[64,64]{1,0} add(f32[64,64]{1,0} %v40, f32[64,64]{1,0} %x)"
    echo "}"
  } > "$work/hlo/bench_$i.hlo"
done

"$npc" import --cache_dir "$work/serial" "$work/hlo" > /dev/null 2>&1
cp -a "$work/serial" "$work/parallel"

seconds() {  # seconds of wall time of "$@", with its output in $work/log
  local start end
  start=$(date +%s.%N)
  "$@" > "$work/log" 2>&1 || { cat "$work/log"; echo "benchmark: '$*' failed" >&2; exit 1; }
  end=$(date +%s.%N)
  awk -v a="$start" -v b="$end" 'BEGIN { print b - a }'
}

serial=$(seconds "$npc" compile --cache_dir "$work/serial" --num_parallel 1)
parallel=$(seconds "$npc" compile --cache_dir "$work/parallel" --num_parallel "$jobs")

digests() { (cd "$1" && find . -name model.so -print0 | sort -z | xargs -0 sha256sum); }
if [ "$(digests "$work/serial")" != "$(digests "$work/parallel")" ]; then
  echo "benchmark: the serial and parallel artifacts differ" >&2
  exit 1
fi
count=$(find "$work/parallel" -name model.done | wc -l)

printf 'modules compiled:        %d (host backend, %s)\n' "$count" "$(ls "$work/serial" | grep -v '^\.')"
printf 'one at a time:           %.2f s\n' "$serial"
printf 'parallel, %2d jobs:       %.2f s\n' "$jobs" "$parallel"
printf 'speedup:                 %.2fx (artifacts byte-identical)\n' "$(awk -v a="$serial" -v b="$parallel" 'BEGIN { print a / b }')"
