#!/usr/bin/env bash
# tools/nvcc.sh: print the path of an nvcc that builds Purlin's kernels.
#
# Uses $NVCC or an nvcc on PATH when one exists; otherwise installs CUDA 13.0's
# compiler and the headers the kernels need (cuda_fp16.h, cuda_bf16.h,
# cuda_fp8.h and the CCCL headers they include) from PyPI into .nvcc/
# (git-ignored), once. CUDA 13.0 is pinned so the output loads under the GPU
# machine's 13.0 driver. Usage: NVCC=$(tools/nvcc.sh) && $NVCC ...
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
if [[ -n "${NVCC:-}" ]]; then echo "$NVCC"; exit 0; fi
if command -v nvcc >/dev/null 2>&1; then command -v nvcc; exit 0; fi

dir="$root/.nvcc"
bin="$dir/site/nvidia/cu13/bin/nvcc"
packages=(
  "nvidia-cuda-nvcc==13.0.88"    # nvcc, ptxas, fatbinary, cicc
  "nvidia-cuda-crt==13.0.88"     # crt/ headers nvcc's front end includes
  "nvidia-cuda-runtime==13.0.96" # cuda_runtime.h, cuda_fp16/bf16/fp8.h
  "nvidia-cuda-cccl==13.0.85"    # cuda/std headers the fp headers include
  "nvidia-nvvm==13.0.88"         # cicc and libdevice (nvcc's device front end)
)
if [[ ! -x "$bin" ]]; then
  py="$(command -v python3 || command -v python)"
  mkdir -p "$dir"
  "$py" -m pip install -q --disable-pip-version-check --no-deps --only-binary=:all: \
    --target "$dir/site" "${packages[@]}" >&2
  chmod +x "$dir"/site/nvidia/cu13/bin/* "$dir"/site/nvidia/cu13/nvvm/bin/* 2>/dev/null || true
fi
[[ -x "$bin" ]] || { echo "tools/nvcc.sh: no nvcc at $bin after install" >&2; exit 1; }
echo "$bin"
