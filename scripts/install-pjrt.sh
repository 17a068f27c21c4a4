#!/usr/bin/env bash
# Installs what npc's pjrt backend needs into a Python virtual environment
# under the build directory (never system-wide):
#   install-pjrt.sh [build dir]    (default: ./build) -> <build dir>/pjrt-venv
# Pinned: xla-cpu-pjrt 0.0.1, XLA's CPU PJRT plugin (xla_plugins/xla_cpu_pjrt/xla_cpu_pjrt.so)
# together with the PJRT C API header it was built from (xla_plugins/xla_cpu_pjrt/include/pjrt_c_api.h,
# API 0.81, the same as the plugin's). jaxlib does not ship pjrt_c_api.h (checked: 0.5.3 to 0.10.2
# hold only the XLA FFI headers), so it is not installed. CMake finds the header and the plugin
# in the venv (NPC_PJRT_INCLUDE_DIR, NPC_PJRT_DEFAULT_PLUGIN). Idempotent: a venv that already
# holds the pinned version is left as it is.
set -euo pipefail
build_dir="${1:-$(dirname "$0")/../build}"
venv="$build_dir/pjrt-venv"
pin="xla-cpu-pjrt==0.0.1"
plugin="$venv/lib/python3*/site-packages/xla_plugins/xla_cpu_pjrt/xla_cpu_pjrt.so"
# shellcheck disable=SC2086
if [ -x "$venv/bin/pip" ] && [[ "$("$venv/bin/pip" show xla-cpu-pjrt 2>/dev/null)" == *$'\nVersion: 0.0.1'* ]] &&
   ls $plugin >/dev/null 2>&1; then
  exit 0
fi
mkdir -p "$build_dir"
echo "npc: installing $pin into $venv" >&2
/usr/bin/python3 -m venv "$venv"
"$venv/bin/pip" install -q --disable-pip-version-check --no-deps "$pin"
# shellcheck disable=SC2086
ls $plugin $venv/lib/python3*/site-packages/xla_plugins/xla_cpu_pjrt/include/pjrt_c_api.h >/dev/null
