# GPT-2 trainer build.
#
#   make train_gpt2cu test_gpt2cu        GPU trainer and GPU test (needs nvcc; runs on a GPU machine)
#   make host                            host-only tools and tests (no GPU, no nvcc needed)
#   make test-host                       build and run the GoogleTest host tests only: a part of
#                                        dev/test/run_all.sh, the one test command (Reference.* left
#                                        out: dev/test/run_host_tests.sh says why)
#
# Switches (each printed with a check mark at start; a bad value stops the build):
#   PRECISION=BF16|FP32                  floatX for parameters/activations/gradients (default BF16)
#   USE_CUDNN=0|1                        cuDNN flash attention instead of llmc/attention.cuh (default 0;
#                                        on sm_90a only the forward: llmc/gpt2.cuh says why)
#   NO_MULTI_GPU=0|1                     build without NCCL (default: 0 when nccl.h is found, else 1)
#   NO_USE_MPI=0|1                       build without MPI (default: 0 when OpenMPI headers are found)
#   GPU_COMPUTE_CAPABILITY=90            target architecture (default: read from nvidia-smi, else 90)
#   CUDNN_FRONTEND_PATH=DIR              cuDNN frontend include dir (default: found via pip package)
#   EXTRA_NVCC_FLAGS="-D..."             tuning overrides for A/B builds (own build dir; printed below)

SHELL := /bin/bash
.DEFAULT_GOAL := all

NVCC ?= nvcc
CXX ?= g++
PYTHON ?= python3

PRECISION ?= BF16
USE_CUDNN ?= 0

ifeq ($(filter $(PRECISION),BF16 FP32),)
  $(error PRECISION must be BF16 or FP32, got '$(PRECISION)')
endif
ifeq ($(filter $(USE_CUDNN),0 1),)
  $(error USE_CUDNN must be 0 or 1, got '$(USE_CUDNN)')
endif
ifeq ($(PRECISION)$(USE_CUDNN),FP321)
  $(error USE_CUDNN=1 needs PRECISION=BF16: cuDNN fused attention is half precision only)
endif

# ---------------------------------------------------------------------------------------------
# GPU architecture (GPU_COMPUTE_CAPABILITY, CC_SOURCE, ARCH_FLAGS)
include mk/arch.mk

# ---------------------------------------------------------------------------------------------
# NCCL and MPI
include mk/multi_gpu.mk
ifeq ($(NO_MULTI_GPU)$(NO_USE_MPI),10)
  $(error NO_USE_MPI=0 needs NCCL (MPI is only used to start NCCL): build with NO_USE_MPI=1 or NO_MULTI_GPU=0)
endif

# ---------------------------------------------------------------------------------------------
# Flags
BUILD_TAG := $(PRECISION)-cudnn$(USE_CUDNN)-nccl$(if $(filter 0,$(NO_MULTI_GPU)),1,0)-mpi$(if $(filter 0,$(NO_USE_MPI)),1,0)-sm$(GPU_COMPUTE_CAPABILITY)
# a cuDNN outside the system dirs (CUDNN_HOME) gets build dirs of its own, named by a checksum of the path:
# its objects are compiled against that cuDNN's headers and linked to its library
ifneq ($(and $(filter 1,$(USE_CUDNN)),$(strip $(CUDNN_HOME))),)
  BUILD_TAG := $(BUILD_TAG)-cudnnhome$(shell printf '%s' '$(strip $(CUDNN_HOME))' | cksum | cut -d' ' -f1)
endif
# EXTRA_NVCC_FLAGS: A/B builds with a tuning override (the #ifndef defaults in llmc/, e.g.
# -DLAYERNORM_BWD_COL_ROWS=4; -DGPT2_CUDNN_BACKWARD=1 together with USE_CUDNN=1, without which it changes
# nothing), or the test build of dev/test/gpu/ (-DLLMC_TEST_HOOKS); they get build dirs of their own,
# named by a checksum of the flags
ifneq ($(strip $(EXTRA_NVCC_FLAGS)),)
  BUILD_TAG := $(BUILD_TAG)-x$(shell printf '%s' '$(strip $(EXTRA_NVCC_FLAGS))' | cksum | cut -d' ' -f1)
endif
BUILD_DIR := build/$(BUILD_TAG)

NVCC_FLAGS := -O3 -std=c++17 --use_fast_math -lineinfo -Xptxas=-warn-spills -Xcompiler=-Wall,-Wno-unused-function
NVCC_FLAGS += $(ARCH_FLAGS)
NVCC_FLAGS += -DENABLE_$(PRECISION) -I. $(EXTRA_NVCC_FLAGS)
NVCC_LDLIBS := -lcublas -lcublasLt -ldl
# host code the GPU programs may call, archived per build dir (GPU_LIB, below): each program links the
# members it uses. With NCCL: the id exchange (llmc/nccl_id_exchange.cpp).
GPU_LIB_SRCS :=
ifeq ($(NO_MULTI_GPU),0)
  NVCC_FLAGS += -DMULTI_GPU
  NVCC_LDLIBS += -lnccl
  GPU_LIB_SRCS += llmc/nccl_id_exchange.cpp
endif
ifeq ($(NO_USE_MPI),0)
  NVCC_FLAGS += -DUSE_MPI -I$(MPI_INCLUDE_DIR)
  NVCC_LDLIBS += -L$(MPI_LIB_DIR) -lmpi
endif

# cuDNN (its own file: finds the frontend headers and the libraries, or stops saying how to get them)
include mk/cudnn.mk

CXXFLAGS_HOST := -O2 -std=c++17 -Wall -Wextra -I. -pthread
HOST_LDLIBS := -Wl,--as-needed -lpcre2-8 -pthread

GPU_HEADERS := $(wildcard llmc/*.h llmc/*.cuh)

# ---------------------------------------------------------------------------------------------
.PHONY: all info host test-host clean
all: info train_gpt2cu test_gpt2cu

ok = $(if $(filter 0,$(1)),✓,✗)
info:
	@echo "---------------------------------------------"
	@echo "✓ PRECISION=$(PRECISION)"
	@echo "✓ GPU_COMPUTE_CAPABILITY=$(GPU_COMPUTE_CAPABILITY) ($(CC_SOURCE))"
	@echo "$(if $(filter 1,$(USE_CUDNN)),✓,✗) cuDNN flash attention (USE_CUDNN=$(USE_CUDNN))$(if $(filter 1,$(USE_CUDNN)), frontend: $(CUDNN_FRONTEND_PATH))"
	@echo "$(call ok,$(NO_MULTI_GPU)) NCCL multi-GPU (NO_MULTI_GPU=$(NO_MULTI_GPU))"
	@echo "$(call ok,$(NO_USE_MPI)) OpenMPI start-up (NO_USE_MPI=$(NO_USE_MPI))"
	@echo "  build dir: $(BUILD_DIR)"$(if $(strip $(EXTRA_NVCC_FLAGS)),; echo "  extra nvcc flags: $(EXTRA_NVCC_FLAGS)")
	@echo "---------------------------------------------"

# Binaries are built per switch combination under $(BUILD_DIR) and copied to the repo root, so
# changing a switch always gives the binary of that combination.
.PHONY: train_gpt2cu test_gpt2cu
train_gpt2cu: $(BUILD_DIR)/train_gpt2cu
	@cp $< $@
test_gpt2cu: $(BUILD_DIR)/test_gpt2cu
	@cp $< $@

# GPU_LIB: the host objects of GPU_LIB_SRCS, compiled by nvcc with this build's flags; no archive when
# there are none (NO_MULTI_GPU=1). Both are written under a temporary name, then renamed: two makes of one
# build dir at once (dev/test/gpu/run_all.sh builds train_gpt2cu and test_gpt2cu so) each link a whole file.
GPU_LIB_OBJS := $(patsubst llmc/%.cpp,$(BUILD_DIR)/%.o,$(GPU_LIB_SRCS))
GPU_LIB := $(if $(GPU_LIB_OBJS),$(BUILD_DIR)/libllmc.a)
$(GPU_LIB_OBJS): $(BUILD_DIR)/%.o: llmc/%.cpp $(wildcard llmc/*.h) | info
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCC_FLAGS) -c $< -o $@.$$$$.tmp && mv -f $@.$$$$.tmp $@
$(GPU_LIB): $(GPU_LIB_OBJS)
	ar rcs $@.$$$$.tmp $^ && mv -f $@.$$$$.tmp $@

$(BUILD_DIR)/train_gpt2cu: train_gpt2.cu $(GPU_HEADERS) $(GPU_LIB) $(CUDNN_OBJ) | info
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCC_FLAGS) $< $(CUDNN_OBJ) $(GPU_LIB) $(NVCC_LDLIBS) $(CUDNN_LDLIBS) -o $@

$(BUILD_DIR)/test_gpt2cu: test_gpt2.cu dev/test/debug_state.h $(GPU_HEADERS) $(GPU_LIB) $(CUDNN_OBJ) | info
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCC_FLAGS) $< $(CUDNN_OBJ) $(GPU_LIB) $(NVCC_LDLIBS) $(CUDNN_LDLIBS) -o $@

# ---------------------------------------------------------------------------------------------
# Host-only code: llmc/*.cpp (except the cuDNN one) is a static library, build/host/libllmc.a, shared by
# tools and tests. Linked as an archive, a program gets only the objects it calls (gpt2tok: the BPE, not
# the id exchange's TCP server); --as-needed likewise drops the shared libraries it does not call.
HOST_LIB_SRCS := $(filter-out llmc/cudnn_att.cpp,$(wildcard llmc/*.cpp))
HOST_LIB_OBJS := $(patsubst %.cpp,build/host/%.o,$(HOST_LIB_SRCS))
HOST_LIB := build/host/libllmc.a
HOST_TEST_SRCS := $(wildcard dev/test/test_*.cpp)
HOST_TESTS := $(patsubst dev/test/%.cpp,build/host/tests/%,$(HOST_TEST_SRCS))
HOST_TOOLS :=

build/host/%.o: %.cpp $(wildcard llmc/*.h)
	@mkdir -p $(dir $@)
	$(CXX) $(CXXFLAGS_HOST) -c $< -o $@

$(HOST_LIB): $(HOST_LIB_OBJS)
	@rm -f $@
	ar rcs $@ $^

build/host/tests/%: dev/test/%.cpp $(HOST_LIB) $(wildcard llmc/*.h dev/test/*.h)
	@mkdir -p $(dir $@)
	$(CXX) $(CXXFLAGS_HOST) $< $(HOST_LIB) -lgtest -lgtest_main $(HOST_LDLIBS) -o $@

# model_config: what llmc/model_file.h makes of model descriptors (dev/test/descriptor_check.sh)
build/host/tools/model_config: dev/test/model_config.cpp $(wildcard llmc/*.h)
	@mkdir -p $(dir $@)
	$(CXX) $(CXXFLAGS_HOST) $< -o $@

# Tools register themselves in their own fragments (e.g. dev/data/data.mk appends to HOST_TOOLS).
-include dev/data/data.mk

host: $(HOST_TOOLS) $(HOST_TESTS) build/host/tools/model_config

test-host: host
	@bash dev/test/run_host_tests.sh $(HOST_TESTS)

clean:
	rm -rf build train_gpt2cu test_gpt2cu
