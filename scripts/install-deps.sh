#!/usr/bin/env bash
# Installs the Debian 12 packages npc needs to build and test, when missing.
set -euo pipefail
packages=(g++ cmake ninja-build pkg-config protobuf-compiler libprotobuf-dev nlohmann-json3-dev
          libgtest-dev libgmock-dev libcli11-dev libssl-dev zlib1g-dev libcurl4-openssl-dev)
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
