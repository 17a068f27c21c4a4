#!/usr/bin/env bash
# Builds npc and runs every test (unit and end-to-end, with a real ninja and a
# real C++ compiler) through ctest, after a short fuzzing run (scripts/fuzz.sh).
# Installs the test-only Debian packages too (python3-torch, the PyTorch
# reference of the corpus MLP comparison; clang for the fuzzers).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh --tests
bash scripts/build.sh
# A short fuzzing run of the HLO readers and the host code generator (libFuzzer,
# ASan, UBSan; about 60 s in all, NPC_FUZZ_SECONDS to change): scripts/fuzz.sh.
bash scripts/fuzz.sh "${NPC_FUZZ_SECONDS:-60}"
cd build
ctest --output-on-failure -j "$(nproc)" "$@"
