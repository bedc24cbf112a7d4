# python/python.mk: the Python package's targets, included by the top Makefile.
#   make python      pip install ./python into the environment of $(PYTHON) (python3:
#                    the active virtual environment's, if any); the same as running it by hand
#   make python-lib  build/python/libpurlin.so and its core, the library the wheel ships (the
#                    package's build backend, python/build_backend/purlin_build.py, runs it)
# The wheel's library holds the CUDA kernels when PURLIN_WITH_KERNELS=1 (then
# `make kernels` fetches nvcc from PyPI if none is on PATH); by default only
# when an nvcc is already at hand ($NVCC or on PATH): pip install never
# downloads nvcc unasked.
PYTHON ?= python3
PY_LIB := $(BUILD)/python/libpurlin.so
PURLIN_WITH_KERNELS ?= $(if $(shell command -v $(or $(NVCC),nvcc) 2>/dev/null),1,0)
py_kernels = $(filter 1,$(PURLIN_WITH_KERNELS))

.PHONY: python python-lib
python:
	$(PYTHON) -m pip install ./python

# Its own file, always handed to `go build` (FORCE, like nccl-so): a change
# of kernels or none is never mistaken for up to date, and Go's cache keeps
# an unchanged build cheap.
python-lib: $(if $(py_kernels),kernels) FORCE
	$(call purlin-lib,$(PY_LIB),libpurlin.so,$(if $(py_kernels),cudakernels))
