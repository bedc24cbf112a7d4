# tests/tests.mk: builds the C suites and the ABI test; included by the top Makefile.
# C tests link build/libpurlin.so with an rpath, so they run from anywhere.
CC          ?= gcc
TEST_BUILD  := $(BUILD)/tests
TEST_CFLAGS := -std=gnu11 -O2 -g -Wall -Wextra -Werror=implicit-function-declaration -I$(CURDIR)/include -I$(CURDIR)/tests/c -I$(CURDIR)/cmd/purlin-perf
TEST_LDLIBS := -L$(BUILD) -Wl,-rpath,$(BUILD) -lpurlin -lm -lpthread

# tests/c/dtypes.c encodes floats with purlin-perf's codec (one copy of it).
C_DTYPES  := tests/c/dtypes.c cmd/purlin-perf/dtype.c
C_COMMON  := $(addprefix tests/c/,harness.c reference.c coll.c coll_run.c clique.c procs.c) $(C_DTYPES)
C_BADINPUT := $(addprefix tests/c/,badproc.c badlaunch.c)
C_HEADERS := $(wildcard tests/c/*.h include/*.h)
C_SUITES  := single multiproc badinput layouts epilogue callcache

.PHONY: c-tests-build c-tests abi-test
# tests/c/run.sh also runs build/purlin-perf (cmd/purlin-perf/perf.mk) on 8 ranks.
c-tests-build: $(TEST_BUILD)/selftest $(TEST_BUILD)/callcache_unit $(TEST_BUILD)/launch_unit $(addprefix $(TEST_BUILD)/,$(C_SUITES)) $(BUILD)/purlin-perf

$(TEST_BUILD)/selftest: tests/c/selftest.c tests/c/harness.c $(C_DTYPES) tests/c/reference.c $(C_HEADERS)
	@mkdir -p $(TEST_BUILD)
	$(CC) $(TEST_CFLAGS) -o $@ $(filter %.c,$^) -lm

# The call cache alone, without the library (tests/c/callcache.c is its
# suite through the library), and the CUDA Atom's launch from C alone, with
# fake driver entry points: both with AddressSanitizer and UBSan.
UNIT_CFLAGS := $(TEST_CFLAGS) -fsanitize=address,undefined -fno-sanitize-recover=undefined -pthread
$(TEST_BUILD)/callcache_unit: tests/c/callcache_unit.c tests/c/harness.c capi/shim/callcache.c capi/callcache.h capi/capi.h tests/c/harness.h
	@mkdir -p $(TEST_BUILD)
	$(CC) $(UNIT_CFLAGS) -I$(CURDIR)/capi -o $@ $(filter %.c,$^) -lm

$(TEST_BUILD)/launch_unit: tests/c/launch_unit.c tests/c/harness.c atom/cuda/launch.c atom/cuda/launch.h tests/c/harness.h
	@mkdir -p $(TEST_BUILD)
	$(CC) $(UNIT_CFLAGS) -I$(CURDIR)/atom/cuda -o $@ $(filter %.c,$^) -lm

$(TEST_BUILD)/badinput: $(C_BADINPUT)
$(TEST_BUILD)/%: tests/c/%.c $(C_COMMON) $(C_HEADERS) $(LIB)
	@mkdir -p $(TEST_BUILD)
	$(CC) $(TEST_CFLAGS) -o $@ $< $(C_COMMON) $(if $(filter badinput,$*),$(C_BADINPUT)) $(TEST_LDLIBS)

c-tests: c-tests-build
	tests/c/run.sh $(TEST_BUILD)

abi-test: $(LIB)
	tests/abi/run.sh $(LIB)
