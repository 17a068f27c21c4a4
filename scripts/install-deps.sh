#!/usr/bin/env bash
# Installs the Debian 12 packages npc needs to build and test, when missing.
#   install-deps.sh           what the build needs
#   install-deps.sh --tests   also what only the tests use: python3-torch (PyTorch for /usr/bin/python3,
#                             the reference of tests/e2e/torch_compare_test.cc), clang with its
#                             libFuzzer/sanitizer runtimes (scripts/fuzz.sh), what --pjrt installs,
#                             and jax (scripts/install-pjrt.sh --jax)
#   install-deps.sh --fuzz    the build's packages and clang (scripts/fuzz.sh)
#   install-deps.sh --pjrt [build dir]   also the pjrt backend's XLA CPU plugin and PJRT C API header
#                             (scripts/install-pjrt.sh: a Python venv under the build directory, never system-wide)
set -euo pipefail
packages=(g++ cmake ninja-build pkg-config protobuf-compiler libprotobuf-dev nlohmann-json3-dev
          libgtest-dev libgmock-dev libcli11-dev libssl-dev zlib1g-dev libcurl4-openssl-dev)
pjrt=0
if [ "${1:-}" = "--tests" ]; then
  packages+=(python3-torch python3-venv clang libclang-rt-dev)
  pjrt=1
elif [ "${1:-}" = "--fuzz" ]; then
  packages+=(clang libclang-rt-dev)
elif [ "${1:-}" = "--pjrt" ]; then
  packages+=(python3-venv)
  pjrt=1
fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "npc: installing ${missing[*]}" >&2
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
if [ "${1:-}" = "--pjrt" ]; then
  bash "$(dirname "$0")/install-pjrt.sh" "${2:-$(dirname "$0")/../build}"
elif ((pjrt)); then
  # For the tests: without PyPI the pjrt backend is not built and its tests skip.
  bash "$(dirname "$0")/install-pjrt.sh" --jax "${2:-$(dirname "$0")/../build}" ||
    echo "npc: warning: could not install the pjrt backend's plugin or jax; their tests will skip" >&2
fi
