#!/usr/bin/env bash
# tests/abi/fetch-nccl.sh DIR: puts NCCL's own headers (nccl.h, nccl_device.h and
# the nccl_device/ tree it includes) into DIR (build/nccl), taken from the
# nvidia-nccl-cu13 wheel on PyPI. The headers are NVIDIA's: they are downloaded
# for the tests and never committed.
set -eu
dir=${1:?usage: fetch-nccl.sh DIR}
[ -f "$dir/nccl.h" ] && [ -f "$dir/nccl_device.h" ] && exit 0
mkdir -p "$dir"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for v in 2.28.9 2.28.7 2.28.3; do
  if python3 -m pip download -q --no-deps --only-binary=:all: "nvidia-nccl-cu13==$v" -d "$tmp" >&2; then
    python3 - "$tmp" "$dir" <<'PY'
import glob, os, sys, zipfile
whl = glob.glob(sys.argv[1] + "/*.whl")[0]
prefix = "nvidia/nccl/include/"
with zipfile.ZipFile(whl) as z:
    for name in z.namelist():
        if name.startswith(prefix) and not name.endswith("/"):
            path = sys.argv[2] + "/" + name[len(prefix):]
            os.makedirs(os.path.dirname(path), exist_ok=True)
            open(path, "wb").write(z.read(name))
    open(sys.argv[2] + "/SOURCE", "w").write(whl.rsplit("/", 1)[1] + "\n")
PY
    echo "NCCL headers from nvidia-nccl-cu13==$v" >&2
    exit 0
  fi
done
echo "could not download nvidia-nccl-cu13 from PyPI" >&2
exit 1
