#!/usr/bin/env bash
# tests/abi/fetch-nccl.sh DIR: puts NCCL's own nccl.h into DIR (build/nccl), taken
# from the nvidia-nccl-cu13 wheel on PyPI. The header is NVIDIA's: it is
# downloaded for the test and never committed.
set -eu
dir=${1:?usage: fetch-nccl.sh DIR}
[ -f "$dir/nccl.h" ] && exit 0
mkdir -p "$dir"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for v in 2.28.9 2.28.7 2.28.3; do
  if python3 -m pip download -q --no-deps --only-binary=:all: "nvidia-nccl-cu13==$v" -d "$tmp" >&2; then
    python3 - "$tmp" "$dir" <<'PY'
import glob, sys, zipfile
whl = glob.glob(sys.argv[1] + "/*.whl")[0]
with zipfile.ZipFile(whl) as z:
    open(sys.argv[2] + "/nccl.h", "wb").write(z.read("nvidia/nccl/include/nccl.h"))
    open(sys.argv[2] + "/SOURCE", "w").write(whl.rsplit("/", 1)[1] + "\n")
PY
    echo "nccl.h from nvidia-nccl-cu13==$v" >&2
    exit 0
  fi
done
echo "could not download nvidia-nccl-cu13 from PyPI" >&2
exit 1
