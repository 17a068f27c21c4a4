#!/usr/bin/env bash
# Builds npc and runs every test (unit and end-to-end, with a real ninja and a
# real C++ compiler) through ctest. Installs the test-only Debian packages too
# (python3-torch, the PyTorch reference of the corpus MLP comparison).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh --tests
bash scripts/build.sh
cd build
ctest --output-on-failure -j "$(nproc)" "$@"
