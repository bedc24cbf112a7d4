# csrc/kernels.mk: the CUDA kernels, included by the top Makefile.
#   make kernels   build/kernels.fatbin (sm_80 and sm_90 SASS, sm_90 PTX; compressed, which the
#                  driver undoes as it loads the module: 1.9 MB instead of 15.6), copied to
#                  atom/cuda/kernels.fatbin where go:embed (tag cudakernels) expects it
#   make lib-cuda  build/libpurlin.so with the kernels embedded
#   make kernels-headers  compiles every .cuh alone (each header must be standalone)
#   make gpu-programs-check  compiles the GPU suite's programs (tests/gpu/*.c, stepbench.cu)
# nvcc comes from tools/nvcc.sh: $NVCC, an nvcc on PATH, or CUDA 13.0 from PyPI in .nvcc/.
KERNEL_SRC    := $(wildcard csrc/*.cu csrc/*.cuh)
KERNEL_FATBIN := $(BUILD)/kernels.fatbin
KERNEL_EMBED  := atom/cuda/kernels.fatbin
NVCC_FLAGS    := -std=c++17 -O3 --threads 0 -Xptxas -warn-spills -Xfatbin -compress-all \
                 -gencode arch=compute_80,code=sm_80 \
                 -gencode arch=compute_90,code=sm_90 \
                 -gencode arch=compute_90,code=compute_90

.PHONY: kernels lib-cuda kernels-headers gpu-programs-check gpu-tests
kernels: $(KERNEL_EMBED)

$(KERNEL_FATBIN): $(KERNEL_SRC) csrc/kernels.mk
	@mkdir -p $(BUILD)
	"$$(tools/nvcc.sh)" $(NVCC_FLAGS) -fatbin -o $@ csrc/run.cu

$(KERNEL_EMBED): $(KERNEL_FATBIN)
	cp $< $@

# gpu-programs-check: the GPU suite's C programs (tests/gpu/*.c, and tests/c/callcache.c
# on device memory) compile against Purlin's headers and CUDA's (from nvcc's install), tests/gpu/stepbench.cu
# against the kernel's sources, and the ceiling benchmarks (cebench.cu, smbench.cu), so a change that breaks one shows here, not on
# the GPU machine. stepbench compiles unoptimized (-G): the same checks, in 30 s
# instead of 3 minutes on two cores (it is built optimized where it runs).
gpu-programs-check:
	@cuda_inc="$$(dirname "$$(dirname "$$(tools/nvcc.sh)")")/include"; \
	for c in tests/gpu/*.c; do \
	  $(CC) -std=gnu11 -O2 -Wall -Wextra -Werror -Iinclude -I"$$cuda_inc" -c -o /dev/null "$$c" || exit 1; \
	done; \
	$(CC) -std=gnu11 -O2 -Wall -Wextra -Werror -DCALLCACHE_CUDA -Iinclude -Itests/c -I"$$cuda_inc" -c -o /dev/null tests/c/callcache.c
	"$$(tools/nvcc.sh)" -std=c++17 -G --threads 0 -arch=sm_90 -Icsrc -c -o /dev/null tests/gpu/stepbench.cu
	for b in cebench smbench; do "$$(tools/nvcc.sh)" -std=c++17 -O3 -arch=sm_90 -c -o /dev/null tests/gpu/$$b.cu || exit 1; done

kernels-headers:
	@for h in csrc/*.cuh; do \
	  echo "#include \"$$(basename $$h)\"" > $(BUILD)/header_check.cu; \
	  "$$(tools/nvcc.sh)" -std=c++17 -Icsrc -arch=sm_90 -c -o /dev/null $(BUILD)/header_check.cu || exit 1; \
	done

lib-cuda: kernels
	$(MAKE) lib GOTAGS=cudakernels

# gpu-tests: what tests/gpu/run.sh needs on the GPU machine (it has no Go):
# build/gpu/cuda.test and build/gpu/lib/libpurlin.so with its core (kernels embedded; its own
# copy, so a plain `make lib` cannot replace it with a kernel-less build), and
# build/gpu/COMMIT, the commit they were built from (the suite's JSON names it).
gpu-tests: kernels
	@mkdir -p $(BUILD)/gpu/lib
	CGO_ENABLED=1 $(GO) test -c -tags cudakernels -ldflags="-s -w" -o $(BUILD)/gpu/cuda.test ./atom/cuda
	CGO_ENABLED=1 $(GO) test -c -tags cudakernels -ldflags="-s -w" -o $(BUILD)/gpu/comm.test ./comm
	$(call purlin-lib,$(BUILD)/gpu/lib/libpurlin.so,libpurlin.so,cudakernels)
	@git describe --always --dirty >$(BUILD)/gpu/COMMIT 2>/dev/null || echo unknown >$(BUILD)/gpu/COMMIT
