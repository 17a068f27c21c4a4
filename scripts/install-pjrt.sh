#!/usr/bin/env bash
# Installs what npc's pjrt backend needs into a Python virtual environment
# under the build directory (never system-wide):
#   install-pjrt.sh [--jax] [build dir]    (default: ./build) -> <build dir>/pjrt-venv
# Pinned: xla-cpu-pjrt 0.0.1, XLA's CPU PJRT plugin (xla_plugins/xla_cpu_pjrt/xla_cpu_pjrt.so)
# together with the PJRT C API header it was built from (xla_plugins/xla_cpu_pjrt/include/pjrt_c_api.h,
# API 0.81, the same as the plugin's). jaxlib does not ship pjrt_c_api.h (checked: 0.5.3 to 0.10.2
# hold only the XLA FFI headers), so it is not needed for the build. CMake finds the header and the
# plugin in the venv (NPC_PJRT_INCLUDE_DIR, NPC_PJRT_DEFAULT_PLUGIN).
# --jax: also jax and jaxlib 0.10.2 (and their dependencies), with which the tests export real JAX
# programs (tests/jax/export_programs.py). Idempotent: what is already installed is left as it is.
set -euo pipefail
jax=0
if [ "${1:-}" = "--jax" ]; then
  jax=1
  shift
fi
build_dir="${1:-$(dirname "$0")/../build}"
venv="$build_dir/pjrt-venv"
pins=("xla-cpu-pjrt==0.0.1")
jax_pins=("jax==0.10.2" "jaxlib==0.10.2")
plugin="$venv/lib/python3*/site-packages/xla_plugins/xla_cpu_pjrt/xla_cpu_pjrt.so"
mkdir -p "$build_dir"
[ -x "$venv/bin/pip" ] || /usr/bin/python3 -m venv "$venv"
# shellcheck disable=SC2086
if ! ls $plugin >/dev/null 2>&1 || [[ "$("$venv/bin/pip" show xla-cpu-pjrt 2>/dev/null)" != *$'\nVersion: 0.0.1'* ]]; then
  echo "npc: installing ${pins[*]} into $venv" >&2
  "$venv/bin/pip" install -q --disable-pip-version-check --no-deps "${pins[@]}"
fi
# shellcheck disable=SC2086
ls $plugin $venv/lib/python3*/site-packages/xla_plugins/xla_cpu_pjrt/include/pjrt_c_api.h >/dev/null
if ((jax)) && ! "$venv/bin/python" -c 'import jax, jaxlib, sys; sys.exit(jax.__version__ != "0.10.2" or jaxlib.__version__ != "0.10.2")' 2>/dev/null; then
  echo "npc: installing ${jax_pins[*]} into $venv" >&2
  "$venv/bin/pip" install -q --disable-pip-version-check "${jax_pins[@]}"
fi
