# tests/gpu/ngpus.sh: sourced by the GPU suites (run.sh, extended.sh). Sets
# NGPUS, the ranks every multi-GPU run uses, unless the caller set it: the
# GPUs CUDA_VISIBLE_DEVICES names, else those nvidia-smi lists; at most 8
# (Purlin's ranks per communicator), at least 2. Every rank is one GPU.
if [[ -z ${NGPUS:-} ]]; then
  if [[ -n ${CUDA_VISIBLE_DEVICES:-} ]]; then
    NGPUS=$(tr ',' '\n' <<<"$CUDA_VISIBLE_DEVICES" | grep -c .)
  else
    NGPUS=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
  fi
  (( NGPUS > 8 )) && NGPUS=8
  (( NGPUS < 2 )) && NGPUS=2
fi
export NGPUS
