# tests/gpu/find-nccl.sh: sourced by the GPU scripts. Sets nccl_inc and
# nccl_lib to the machine's real NCCL: the nvidia-nccl-cu13 package's (what
# torch installs), else the system's.
nccl_dir="$(python3 -c 'import nvidia.nccl as m; print(list(m.__path__)[0])' 2>/dev/null)"
nccl_inc="$nccl_dir/include" nccl_lib="$nccl_dir/lib"
if [[ ! -f "$nccl_inc/nccl.h" ]]; then nccl_inc=/usr/include nccl_lib=/usr/lib/x86_64-linux-gnu; fi
