# Purlin build. `make lib` builds build/libpurlin.so (and its core, build/libpurlin-core.so);
# `make test` runs every test.
# Sub-makefiles add their own targets: csrc/kernels.mk (CUDA fatbin), cmd/purlin-perf/perf.mk,
# python/python.mk (`make python`: pip install ./python).
GO      ?= go
BUILD   := $(CURDIR)/build
LIB     := $(BUILD)/libpurlin.so
GOTAGS  ?=

# Purlin is two files (capi/capi.h): the C shim, with every public name, and the
# Go core beside it, loaded at the first call that needs it so that a process may
# map Purlin and fork workers before that call. $(call purlin-lib,OUT,SONAME,TAGS)
# builds the shim OUT (with SONAME) and OUT's directory's libpurlin-core.so
# (go build -tags TAGS). Both are always rebuilt where a rule calls it: Go's cache
# makes an unchanged build cheap, the shim is a few C files.
CORE_LDFLAGS := -s -w '-extldflags=-Wl,--version-script=$(CURDIR)/capi/core.map -Wl,-soname,libpurlin-core.so'
SHIM_SRC     := $(wildcard $(CURDIR)/capi/shim/*.c)
SHIM_CFLAGS  := -shared -fPIC -O2 -Wall -Werror -I$(CURDIR)/include -I$(CURDIR)/capi
SHIM_LDFLAGS := -Wl,--version-script=$(CURDIR)/capi/exports.map -ldl -pthread
define purlin-lib
	@mkdir -p $(dir $(1))
	CGO_ENABLED=1 $(GO) build -buildmode=c-shared -trimpath -tags '$(3)' -ldflags="$(CORE_LDFLAGS)" -o $(dir $(1))libpurlin-core.so ./capi
	$(CC) $(SHIM_CFLAGS) -I$(dir $(1)) -o $(1) $(SHIM_SRC) -Wl,-soname,$(2) $(SHIM_LDFLAGS)
	@rm -f $(dir $(1))libpurlin-core.h
endef

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
	$(call purlin-lib,$@,libnccl.so.2,$(GOTAGS))
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

$(LIB): $(shell find . -name '*.go' -not -path './build/*') $(wildcard capi/*.c capi/*.h capi/*.map capi/shim/* include/*.h)
	$(call purlin-lib,$(LIB),libpurlin.so,$(GOTAGS))

include tests/tests.mk
-include csrc/kernels.mk
-include cmd/purlin-perf/perf.mk
-include packaging/install.mk
include python/python.mk
