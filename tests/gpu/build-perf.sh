# tests/gpu/build-perf.sh: sourced by the GPU suites (run.sh, extended.sh) on the
# GPU machine: builds purlin-perf against Purlin ($bin/perf-purlin) and against
# the machine's NCCL ($bin/perf-nccl), memalloc_e2e, peerdeath, purlin-perf's
# staging test ($bin/perf-staging-test), callpath on each library
# ($bin/callpath-purlin, $bin/callpath-nccl), and tests/c/callcache.c on device
# memory ($bin/callcache). Needs $root, $gpu,
# $bin and $out set; appends its log to $out/env.log and leaves $? as the
# build's status.
cuda_home="$(dirname "$(dirname "$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)")")"
cudart="$(ls "$cuda_home"/lib64/libcudart.so "$cuda_home"/targets/x86_64-linux/lib/libcudart.so "$cuda_home"/lib64/libcudart.so.* 2>/dev/null | head -1)"
source "$root/tests/gpu/find-nccl.sh"
perf_src=(main bench colls colls_v colls_layouts colls_epilogue values dtype multiproc backend_cuda)
perf_src=("${perf_src[@]/#/$root/cmd/purlin-perf/}"); perf_src=("${perf_src[@]/%/.c}")
cc_cuda=(gcc -O2 -g -std=gnu11 -DPERF_CUDA -I"$cuda_home/include")
(
  echo "cuda_home=$cuda_home cudart=$cudart nccl_inc=$nccl_inc nccl_lib=$nccl_lib"
  ls "$nccl_lib"/libnccl* 2>&1
  set -x
  "${cc_cuda[@]}" -I"$root/include" -o "$bin/perf-purlin" "${perf_src[@]}" \
    -L"$gpu/lib" -lpurlin -Wl,-rpath,"$gpu/lib" "$cudart" -Wl,-rpath,"$(dirname "$cudart")" -lm -lpthread &&
  "${cc_cuda[@]}" -DPERF_REAL_NCCL -I"$nccl_inc" -I"$root/include" -o "$bin/perf-nccl" "${perf_src[@]}" \
    -L"$nccl_lib" -Wl,-rpath,"$nccl_lib" -l:libnccl.so.2 "$cudart" -Wl,-rpath,"$(dirname "$cudart")" -lm -lpthread &&
  gcc -O2 -I"$cuda_home/include" -I"$root/include" -o "$bin/memalloc_e2e" "$root/tests/gpu/memalloc_e2e.c" \
    -L"$gpu/lib" -lpurlin -Wl,-rpath,"$gpu/lib" "$cudart" -Wl,-rpath,"$(dirname "$cudart")" &&
  "${cc_cuda[@]}" -I"$root/include" -o "$bin/perf-staging-test" "$root/cmd/purlin-perf/tests/staging_test.c" \
    "$root/cmd/purlin-perf/backend_cuda.c" -L"$gpu/lib" -lpurlin -Wl,-rpath,"$gpu/lib" "$cudart" \
    -Wl,-rpath,"$(dirname "$cudart")" -lm -lpthread &&
  gcc -O2 -I"$cuda_home/include" -I"$root/include" -o "$bin/peerdeath" "$root/tests/gpu/peerdeath.c" \
    -L"$gpu/lib" -lpurlin -Wl,-rpath,"$gpu/lib" "$cudart" -Wl,-rpath,"$(dirname "$cudart")" &&
  gcc -O2 -I"$cuda_home/include" -I"$root/include" -o "$bin/callpath-purlin" "$root/tests/gpu/callpath.c" \
    -L"$gpu/lib" -lpurlin -Wl,-rpath,"$gpu/lib" "$cudart" -Wl,-rpath,"$(dirname "$cudart")" -ldl &&
  gcc -O2 -DREAL_NCCL -I"$nccl_inc" -I"$cuda_home/include" -o "$bin/callpath-nccl" "$root/tests/gpu/callpath.c" \
    -L"$nccl_lib" -Wl,-rpath,"$nccl_lib" -l:libnccl.so.2 "$cudart" -Wl,-rpath,"$(dirname "$cudart")" -ldl &&
  gcc -O2 -std=gnu11 -DCALLCACHE_CUDA -I"$cuda_home/include" -I"$root/include" -I"$root/tests/c" -o "$bin/callcache" \
    "$root/tests/c/callcache.c" "$root/tests/c/harness.c" -L"$gpu/lib" -lpurlin -Wl,-rpath,"$gpu/lib" "$cudart" \
    -Wl,-rpath,"$(dirname "$cudart")" -lm -lpthread
) >>"$out/env.log" 2>&1
