# Purlin build. `make lib` builds build/libpurlin.so; `make test` runs every test.
# Sub-makefiles add their own targets: csrc/kernels.mk (CUDA fatbin), cmd/purlin-perf/perf.mk,
# python/python.mk (`make python`: pip install ./python).
GO      ?= go
BUILD   := $(CURDIR)/build
LIB     := $(BUILD)/libpurlin.so
GOTAGS  ?=
comma   := ,
LDFLAGS := -s -w '-extldflags=-Wl,--version-script=$(CURDIR)/capi/exports.map -Wl,-soname,libpurlin.so'

.PHONY: lib test nccl-so nccl-so-cuda gpu-test FORCE
lib: $(LIB)

# The drop-in build: the same library with SONAME libnccl.so.2, so that under
# LD_PRELOAD the dynamic loader counts NCCL as loaded and never maps the real one.
# It is always handed to `go build` (FORCE): Go's cache makes an unchanged build
# cheap, and a change of GOTAGS (with or without the CUDA kernels) is never
# mistaken for up to date. `make nccl-so-cuda` embeds the kernels, which a GPU
# program needs; `readelf -d build/nccl-so/libnccl.so.2` shows the SONAME.
NCCL_SO := $(BUILD)/nccl-so/libnccl.so.2
nccl-so: $(NCCL_SO)
$(NCCL_SO): FORCE
	@mkdir -p $(dir $@)
	CGO_ENABLED=1 $(GO) build -buildmode=c-shared -trimpath -tags '$(GOTAGS)' -ldflags="$(subst -soname$(comma)libpurlin.so,-soname$(comma)libnccl.so.2,$(LDFLAGS))" -o $@ ./capi
	@rm -f $(dir $@)*.h
	@readelf -d $@ | grep -q 'SONAME.*\[libnccl\.so\.2\]' || { echo "$@: SONAME is not libnccl.so.2" >&2; rm -f $@; exit 1; }

nccl-so-cuda: kernels
	$(MAKE) nccl-so GOTAGS=cudakernels

FORCE:

# `make test`: go vet, go test -race, go fuzz (50000 inputs a decoder), make kernels (and each header alone), the C suites, the ABI
# test and the Python suite; one closing line per suite, non-zero on any failure.
test:
	@tests/run.sh

# `make gpu-test`: the GPU suite, on a machine with GPUs and no Go. Build here
# first (`make gpu-tests nccl-so-cuda`) and carry build/ there.
gpu-test:
	@bash tests/gpu/run.sh; a=$$?; bash tests/gpu/extended.sh; b=$$?; [ $$a = 0 ] && [ $$b = 0 ]

$(LIB): $(shell find . -name '*.go' -not -path './build/*') $(wildcard capi/*.c capi/*.h capi/exports.map include/*.h)
	@mkdir -p $(BUILD)
	CGO_ENABLED=1 $(GO) build -buildmode=c-shared -trimpath -tags '$(GOTAGS)' -ldflags="$(LDFLAGS)" -o $(LIB) ./capi
	@rm -f $(BUILD)/libpurlin.h

include tests/tests.mk
-include csrc/kernels.mk
-include cmd/purlin-perf/perf.mk
-include packaging/install.mk
include python/python.mk
