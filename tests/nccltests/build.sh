#!/usr/bin/env bash
# tests/nccltests/build.sh SRC [OUT]: builds NVIDIA's nccl-tests from SRC, a
# checkout of https://github.com/NVIDIA/nccl-tests that the caller provides,
# into OUT (default build/nccl-tests): the *_perf programs with MPI support
# from minimpi (mpi.h here), so that run.sh can start them as several
# processes, and compiled against NCCL's own headers (tests/abi/fetch-nccl.sh)
# exactly as a user of NCCL builds them. They are linked by the name
# libnccl.so.2 and load whichever library LD_LIBRARY_PATH finds first:
# Purlin's drop-in (build/nccl-so, `make nccl-so-cuda`, needed here to link)
# or the real NCCL.
#
# Needs no GPU: nvcc comes from tools/nvcc.sh (CUDA 13.0 from PyPI when none
# is installed), its CUDA runtime is copied beside the programs, and the
# kernels are built for sm_90 unless NVCC_GENCODE says otherwise.
set -euo pipefail
src=$(cd "${1:?usage: build.sh NCCL_TESTS_SRC [OUT]}" && pwd)
root=$(cd "$(dirname "$0")/../.." && pwd)
out=$(mkdir -p "${2:-$root/build/nccl-tests}" && cd "${2:-$root/build/nccl-tests}" && pwd)
purlin_nccl=$root/build/nccl-so/libnccl.so.2
[[ -f $src/src/common.cu ]] || { echo "build.sh: $src is not an nccl-tests checkout" >&2; exit 2; }
[[ -f $purlin_nccl ]] || { echo "build.sh: $purlin_nccl is missing: run make nccl-so-cuda" >&2; exit 2; }

nvcc=$("$root/tools/nvcc.sh")
cuda_home=$(dirname "$(dirname "$nvcc")")
cudart=$(ls "$cuda_home"/lib*/libcudart.so.[0-9]* | head -1)

# NCCL_HOME: NCCL's headers, and Purlin's libnccl.so.2 to link by name.
"$root/tests/abi/fetch-nccl.sh" "$root/build/nccl"
mkdir -p "$out/nccl-home/lib" "$out/mpi/include" "$out/mpi/lib"
ln -sfn "$root/build/nccl" "$out/nccl-home/include"
ln -sf "$purlin_nccl" "$out/nccl-home/lib/libnccl.so"

# MPI_HOME: minimpi. The programs find it, the CUDA runtime and nccl-tests'
# libverifiable.so beside them ($ORIGIN is in their run path).
cp "$root/tests/nccltests/mpi.h" "$out/mpi/include/mpi.h"
gcc -O2 -Wall -Wextra -std=gnu11 -fPIC -shared -Wl,-soname,libmpi.so -o "$out/libmpi.so" \
  "$root/tests/nccltests/minimpi.c" -lpthread
ln -sf ../../libmpi.so "$out/mpi/lib/libmpi.so"
gcc -O2 -Wall -Wextra -std=gnu11 -I"$root/tests/nccltests" -o "$out/minimpi_test" \
  "$root/tests/nccltests/minimpi_test.c" -L"$out" -lmpi -Wl,-rpath,'$ORIGIN'
mkdir -p "$out/cuda-lib"
cp "$cudart" "$out/"
ln -sf "../$(basename "$cudart")" "$out/cuda-lib/libcudart.so"
ln -sf "$(dirname "$cudart")/libcudadevrt.a" "$out/cuda-lib/libcudadevrt.a"
printf '#!/bin/sh\nexec "%s" -cudart shared "$@"\n' "$nvcc" >"$out/nvcc" # nvcc links cudart_static unless told
chmod +x "$out/nvcc"

make -C "$src/src" -j"$(nproc)" build BUILDDIR="$out" MPI=1 MPI_HOME="$out/mpi" \
  NCCL_HOME="$out/nccl-home" CUDA_HOME="$cuda_home" CUDA_LIB="$out/cuda-lib" NVCC="$out/nvcc" \
  DSO=1 CUDARTLIB=cudart NVCC_GENCODE="${NVCC_GENCODE:--gencode=arch=compute_90,code=sm_90}" \
  >"$out/make.log" 2>&1 || { tail -30 "$out/make.log" >&2; exit 1; }
rm -rf "$out"/*.o "$out"/verifiable/*.o "$out"/{nccl-home,mpi,cuda-lib,os,nvcc} # what only the build needs
{ git -C "$src" rev-parse HEAD 2>/dev/null || sed -n 's/.*NCCL_TESTS_VERSION *//p' "$src/src/common.h" | tr -d '"'; } |
  head -1 >"$out/SOURCE"
ls "$out"/*_perf
