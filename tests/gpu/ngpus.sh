# tests/gpu/ngpus.sh: sourced by the GPU suites (run.sh, extended.sh). Sets
# GPUS_LISTED, the GPUs CUDA_VISIBLE_DEVICES names, else those nvidia-smi
# lists (0 where neither says), and NGPUS, the ranks every multi-GPU run
# uses, unless the caller set it: GPUS_LISTED, at most 8 (Purlin's ranks per
# communicator), at least 2. Rank g runs on GPU g % GPUS_LISTED, so where
# NGPUS is larger ranks share GPUs (NCCL refuses that; Purlin runs it).
if [[ -n ${CUDA_VISIBLE_DEVICES:-} ]]; then
  GPUS_LISTED=$(tr ',' '\n' <<<"$CUDA_VISIBLE_DEVICES" | grep -c .)
else
  GPUS_LISTED=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
fi
if [[ -z ${NGPUS:-} ]]; then
  NGPUS=$GPUS_LISTED
  (( NGPUS > 8 )) && NGPUS=8
  (( NGPUS < 2 )) && NGPUS=2
fi
export NGPUS GPUS_LISTED
