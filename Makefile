# Purlin build. `make lib` builds build/libpurlin.so; `make test` runs every test.
# Sub-makefiles add their own targets: csrc/kernels.mk (CUDA fatbin), cmd/purlin-perf/perf.mk.
GO      ?= go
BUILD   := $(CURDIR)/build
LIB     := $(BUILD)/libpurlin.so
GOTAGS  ?=
LDFLAGS := -s -w '-extldflags=-Wl,--version-script=$(CURDIR)/capi/exports.map -Wl,-soname,libpurlin.so'

.PHONY: lib test
lib: $(LIB)

# `make test`: go vet, go test -race, make kernels, the C suites, the ABI
# test and the Python suite; one closing line per suite, non-zero on any failure.
test:
	@tests/run.sh

$(LIB): $(shell find . -name '*.go' -not -path './build/*') $(wildcard capi/*.c capi/*.h capi/exports.map include/*.h)
	@mkdir -p $(BUILD)
	CGO_ENABLED=1 $(GO) build -buildmode=c-shared -trimpath -tags '$(GOTAGS)' -ldflags="$(LDFLAGS)" -o $(LIB) ./capi
	@rm -f $(BUILD)/libpurlin.h

include tests/tests.mk
-include csrc/kernels.mk
-include cmd/purlin-perf/perf.mk
