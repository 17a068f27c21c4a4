#!/usr/bin/env bash
# Builds npc's libFuzzer targets (tests/fuzz) with clang into ./build-fuzz and
# runs each for its share of SECONDS (default 60 in all), seeded from the HLO
# corpus ($NPC_CORPUS_DIR, else ../shared/corpus next to the repository) when
# it is there. A crash, leak or sanitizer report fails the script and leaves
# the reproducer in build-fuzz/fuzz/artifacts/<target>/.
#   bash scripts/fuzz.sh [seconds]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
targets=(text_reader binary_reader codegen)
per_target=$(( seconds / ${#targets[@]} ))
(( per_target >= 1 )) || per_target=1
bash scripts/install-deps.sh --fuzz
if [[ ! -f build-fuzz/build.ninja ]]; then
  cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++ \
    -DCMAKE_C_COMPILER=clang -DNPC_BUILD_FUZZERS=ON -DNPC_BUILD_TESTS=OFF -DNPC_BUILD_SAMPLES=OFF >/dev/null
fi
cmake --build build-fuzz -j "$(nproc)" --target npc_fuzzers
out=build-fuzz/fuzz
corpus=${NPC_CORPUS_DIR:-$(cd .. && pwd)/shared/corpus}
rm -rf "$out/seeds"
mkdir -p "$out/seeds/text" "$out/seeds/binary"
if [[ -d "$corpus" ]]; then
  n=0
  while IFS= read -r -d '' f; do
    n=$((n + 1))
    cp "$f" "$out/seeds/text/$n.hlo"
    "$out/npc_fuzz_to_proto" "$f" "$out/seeds/binary/$n.pb" "$out/seeds/binary/$n.wrapped.pb" 2>/dev/null || true
  done < <(find "$corpus" -type f -name '*.hlo' -print0 | sort -z)
  while IFS= read -r -d '' f; do
    n=$((n + 1))
    cp "$f" "$out/seeds/binary/$n.pb"
  done < <(find "$corpus" -type f -name '*.binpb' -print0 | sort -z)
  echo "fuzz: $n corpus seeds from $corpus"
else
  echo "fuzz: no corpus at $corpus (set NPC_CORPUS_DIR): starting from a minimal seed only"
fi
printf 'HloModule m\nENTRY e {\n  p = f32[2]{0} parameter(0)\n  ROOT a = f32[2]{0} add(p, p)\n}\n' \
  > "$out/seeds/text/minimal.hlo"
status=0
for t in "${targets[@]}"; do
  seeds="$out/seeds/text"
  [[ $t == binary_reader ]] && seeds="$out/seeds/binary $out/seeds/text"
  work="$out/work/$t"
  mkdir -p "$work" "$out/artifacts/$t"
  echo "fuzz: npc_fuzz_$t for ${per_target}s"
  # shellcheck disable=SC2086
  if ! "$out/npc_fuzz_$t" -max_total_time="$per_target" -rss_limit_mb=2048 -timeout=60 -max_len=16384 -print_final_stats=1 \
      -artifact_prefix="$out/artifacts/$t/" "$work" $seeds > "$out/$t.log" 2>&1; then
    echo "fuzz: npc_fuzz_$t FAILED; log: $out/$t.log, reproducer under $out/artifacts/$t/"
    tail -n 40 "$out/$t.log"
    status=1
  else
    grep -E '^stat::number_of_executed_units|^#[0-9]+.*DONE' "$out/$t.log" | tail -n 2 || true
  fi
done
exit $status
