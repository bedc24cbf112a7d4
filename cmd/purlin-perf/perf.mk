# cmd/purlin-perf/perf.mk: purlin-perf, the collective benchmark (included by the top Makefile).
#
#   make perf        build/purlin-perf against build/libpurlin.so (host Atom backend)
#   make bench       the main job (tools/bench.sh): every collective on 4 host-Atom ranks,
#                    8 B .. 8 MiB; on a machine with NVIDIA GPUs and `make gpu-tests` built,
#                    the CUDA Atom on every GPU, NCCL beside it when found. Ends with a
#                    one-line verdict; the plot of time and bus bandwidth is build/bench.svg
#   make perf-test   the float-codec unit test and a correctness sweep of every
#                    collective, type and op (one process, and one process per rank),
#                    and of every collective on registered windows (-R 1)
#   make perf-cuda   build/purlin-perf-cuda, on a machine with CUDA:
#                      make perf-cuda NVCC=/usr/local/cuda/bin/nvcc            (Purlin's header, -lpurlin)
#                      make perf-cuda PERF_LINK=nccl NCCL_INC=... NCCL_LIB=...  (real nccl.h, -lnccl)
#                    The nccl build runs on Purlin too: LD_PRELOAD=build/libpurlin.so.
PERF_DIR    := cmd/purlin-perf
PERF_COMMON := $(addprefix $(PERF_DIR)/,main.c bench.c colls.c colls_v.c colls_layouts.c colls_epilogue.c values.c \
                 dtype.c multiproc.c)
PERF_HDRS   := $(wildcard $(PERF_DIR)/*.h) include/purlin.h include/purlin_nccl.h
PERF_CFLAGS ?= -O2 -g -Wall -Wextra -std=gnu11
PERF        := $(BUILD)/purlin-perf
BENCH_ARGS  ?= all -g 4 -b 8 -e 8M -f 4 -n 20
# make bench on GPUs: purlin-perf all -g <every GPU> $(BENCH_GPU_ARGS), Purlin then NCCL
BENCH_GPU_ARGS ?= -b 8 -e 256M -f 4 -n 20 -w 2 -c 1

.PHONY: perf bench perf-test perf-cuda perf-abi-check
perf: $(PERF)

$(PERF): $(PERF_COMMON) $(PERF_DIR)/backend_host.c $(PERF_HDRS) $(LIB)
	$(CC) $(PERF_CFLAGS) -Iinclude -o $@ $(PERF_COMMON) $(PERF_DIR)/backend_host.c \
		-L$(BUILD) -lpurlin -Wl,-rpath,'$$ORIGIN' -lm -lpthread

bench: $(PERF)
	@BENCH_ARGS='$(BENCH_ARGS)' BENCH_GPU_ARGS='$(BENCH_GPU_ARGS)' tools/bench.sh

$(BUILD)/perf-dtype-test: $(PERF_DIR)/tests/dtype_test.c $(PERF_DIR)/dtype.c $(PERF_HDRS)
	@mkdir -p $(BUILD)
	$(CC) $(PERF_CFLAGS) -Iinclude -o $@ $(PERF_DIR)/tests/dtype_test.c $(PERF_DIR)/dtype.c -lm

perf-test: $(BUILD)/perf-dtype-test $(PERF)
	$(BUILD)/perf-dtype-test
	PURLIN_ATOM=host $(PERF) all -g 3 -b 8 -e 64K -f 8 -n 1 -w 0 -d all -o all -r 1 > $(BUILD)/perf-test-g3.txt \
		|| (tail -n 30 $(BUILD)/perf-test-g3.txt; exit 1)
	PURLIN_ATOM=host $(PERF) all -g 4 -b 8 -e 64K -f 32 -n 2 -w 1 -d all -m 1 > $(BUILD)/perf-test-m4.txt \
		|| (tail -n 30 $(BUILD)/perf-test-m4.txt; exit 1)
	PURLIN_ATOM=host $(PERF) all -g 3 -b 8 -e 64K -f 64 -n 1 -w 0 -R 1 > $(BUILD)/perf-test-r3.txt \
		|| (tail -n 30 $(BUILD)/perf-test-r3.txt; exit 1)
	@grep -h "Out of bounds" $(BUILD)/perf-test-g3.txt $(BUILD)/perf-test-m4.txt $(BUILD)/perf-test-r3.txt

# ---------- the CUDA variant ----------
NVCC      ?= nvcc
CUDA_HOME ?= $(patsubst %/bin/,%,$(dir $(shell command -v $(NVCC) 2>/dev/null)))
CUDA_LIB  ?= $(firstword $(wildcard $(CUDA_HOME)/lib64 $(CUDA_HOME)/lib))
CUDART    ?= $(firstword $(wildcard $(CUDA_LIB)/libcudart.so $(CUDA_LIB)/libcudart.so.[0-9]*))
PERF_LINK ?= purlin
NCCL_INC  ?=
NCCL_LIB  ?=
PERF_CUDA := $(BUILD)/purlin-perf-cuda

comma := ,
ifeq ($(PERF_LINK),nccl)
PERF_CUDA_FLAGS := -DPERF_REAL_NCCL $(if $(NCCL_INC),-I$(NCCL_INC)) -Iinclude
PERF_CUDA_LIBS  := $(if $(NCCL_LIB),-L$(NCCL_LIB) -Wl$(comma)-rpath$(comma)$(NCCL_LIB)) \
	$(if $(wildcard $(NCCL_LIB)/libnccl.so),-lnccl,$(if $(NCCL_LIB),-l:libnccl.so.2,-lnccl))
PERF_CUDA_DEPS  :=
else
PERF_CUDA_FLAGS := -Iinclude
PERF_CUDA_LIBS  := -L$(BUILD) -lpurlin -Wl,-rpath,'$$ORIGIN'
PERF_CUDA_DEPS  := $(LIB)
endif

perf-cuda: $(PERF_CUDA)

$(PERF_CUDA): $(PERF_COMMON) $(PERF_DIR)/backend_cuda.c $(PERF_HDRS) $(PERF_CUDA_DEPS)
	@test -n "$(CUDART)" || (echo "perf-cuda: no libcudart under CUDA_HOME=$(CUDA_HOME); set NVCC or CUDA_HOME" && exit 1)
	@mkdir -p $(BUILD)
	$(CC) $(PERF_CFLAGS) -DPERF_CUDA $(PERF_CUDA_FLAGS) -I$(CUDA_HOME)/include -o $@ \
		$(PERF_COMMON) $(PERF_DIR)/backend_cuda.c $(PERF_CUDA_LIBS) \
		$(CUDART) -Wl,-rpath,$(CUDA_LIB) -lm -lpthread

# ---------- purlin_nccl.h against NCCL's own header ----------
# make perf-abi-check NCCL_INC=<dir holding nccl.h> [CUDA_HOME=...]: NCCL's header includes cuda_runtime.h.
perf-abi-check: $(PERF_DIR)/tests/abi_values.c include/purlin_nccl.h include/purlin.h
	@test -n "$(NCCL_INC)" || (echo "perf-abi-check: set NCCL_INC to the directory of NCCL's nccl.h" && exit 1)
	@mkdir -p $(BUILD)
	$(CC) -Iinclude -o $(BUILD)/abi-purlin $(PERF_DIR)/tests/abi_values.c
	$(CC) -DUSE_REAL_NCCL -I$(NCCL_INC) -I$(CUDA_HOME)/include -o $(BUILD)/abi-nccl $(PERF_DIR)/tests/abi_values.c
	$(BUILD)/abi-purlin > $(BUILD)/abi-purlin.txt
	$(BUILD)/abi-nccl > $(BUILD)/abi-nccl.txt
	diff -u $(BUILD)/abi-nccl.txt $(BUILD)/abi-purlin.txt && echo "perf-abi-check: purlin_nccl.h matches $(NCCL_INC)/nccl.h"
