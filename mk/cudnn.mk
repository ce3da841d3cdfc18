# cuDNN flash attention (USE_CUDNN=1), included by the Makefile after NVCC_FLAGS is set.
# Finds the cuDNN frontend headers, cudnn.h and libcudnn 9, prints a ✓ line for each (or a ✗ line and
# stops saying how to get what is missing), and builds llmc/cudnn_att.cpp into its own object.
# Sets CUDNN_OBJ, CUDNN_LDLIBS, CUDNN_FRONTEND_PATH and adds -DENABLE_CUDNN to NVCC_FLAGS.
# With USE_CUDNN=0 nothing here is looked for or built.
#
#   make USE_CUDNN=1 cudnn                   just the object (the slow compile, 1-4 minutes)
#   make USE_CUDNN=1 attention_cudnn_check   lab check of llmc/cudnn_att.cpp against an fp32 reference
#   CUDNN_FRONTEND_PATH=DIR                  dir holding cudnn_frontend.h (default: searched, see below)
#   CUDNN_HOME=DIR                           a cuDNN install outside the system dirs (DIR/include, DIR/lib)

CUDNN_OBJ :=
CUDNN_LDLIBS :=

ifeq ($(USE_CUDNN),1)

# ---- frontend headers (a header-only library). Order: CUDNN_FRONTEND_PATH, the vendored copy made by
# dev/cuda/vendor_cudnn_frontend.sh (the GPU machine has no internet), the pip package, usual places.
ifneq ($(strip $(CUDNN_FRONTEND_PATH)),)
  ifeq ($(wildcard $(CUDNN_FRONTEND_PATH)/cudnn_frontend.h),)
    $(info ✗ cuDNN frontend: no cudnn_frontend.h in CUDNN_FRONTEND_PATH=$(CUDNN_FRONTEND_PATH))
    $(error CUDNN_FRONTEND_PATH must be the frontend's include dir, the one holding cudnn_frontend.h)
  endif
  CUDNN_FRONTEND_SOURCE := set by user
else
  CUDNN_FRONTEND_PATH := $(patsubst %/cudnn_frontend.h,%,$(firstword $(wildcard third_party/cudnn-frontend/include/cudnn_frontend.h)))
  CUDNN_FRONTEND_SOURCE := vendored copy
  ifeq ($(CUDNN_FRONTEND_PATH),)
    CUDNN_FRONTEND_PATH := $(shell $(PYTHON) -c "import importlib.metadata as m, os; f = [p for p in (m.files('nvidia-cudnn-frontend') or []) if str(p).endswith('include/cudnn_frontend.h')]; print(os.path.dirname(f[0].locate()) if f else '')" 2>/dev/null)
    CUDNN_FRONTEND_SOURCE := pip package nvidia-cudnn-frontend
  endif
  ifeq ($(CUDNN_FRONTEND_PATH),)
    CUDNN_FRONTEND_PATH := $(patsubst %/cudnn_frontend.h,%,$(firstword $(wildcard $(HOME)/cudnn-frontend/include/cudnn_frontend.h /usr/local/include/cudnn_frontend.h /usr/include/cudnn_frontend.h)))
    CUDNN_FRONTEND_SOURCE := found in a usual place
  endif
  ifeq ($(CUDNN_FRONTEND_PATH),)
    $(info ✗ cuDNN frontend headers not found (looked in third_party/cudnn-frontend/include, the pip package nvidia-cudnn-frontend via $(PYTHON), ~/cudnn-frontend/include, /usr/local/include, /usr/include))
    $(error USE_CUDNN=1 needs the cuDNN frontend headers: `$(PYTHON) -m pip install nvidia-cudnn-frontend` (then dev/cuda/vendor_cudnn_frontend.sh to copy them into third_party/ for a machine without internet), or `git clone https://github.com/NVIDIA/cudnn-frontend ~/cudnn-frontend`, or set CUDNN_FRONTEND_PATH=<dir holding cudnn_frontend.h>; or build with USE_CUDNN=0)
  endif
endif
CUDNN_FRONTEND_VERSION_STR := $(shell awk '/define CUDNN_FRONTEND_(MAJOR|MINOR|PATCH)_VERSION /{printf "%s%s", s, $$3; s = "."}' $(CUDNN_FRONTEND_PATH)/cudnn_frontend_version.h 2>/dev/null)
$(info ✓ cuDNN frontend $(CUDNN_FRONTEND_VERSION_STR) headers: $(CUDNN_FRONTEND_PATH) ($(CUDNN_FRONTEND_SOURCE)))

# ---- cudnn.h (cuDNN 9): system dirs, then the CUDA toolkit's include dir
CUDA_TOOLKIT_DIR := $(patsubst %/bin/nvcc,%,$(shell command -v $(NVCC) 2>/dev/null))
CUDNN_HEADER := $(firstword $(wildcard $(if $(CUDNN_HOME),$(CUDNN_HOME)/include/cudnn.h) /usr/include/cudnn.h \
    /usr/include/x86_64-linux-gnu/cudnn.h /usr/include/aarch64-linux-gnu/cudnn.h \
    $(CUDA_TOOLKIT_DIR)/include/cudnn.h /usr/local/cuda/include/cudnn.h))
ifeq ($(CUDNN_HEADER),)
  $(info ✗ cudnn.h not found (looked in $(if $(CUDNN_HOME),$(CUDNN_HOME)/include )/usr/include, /usr/include/<arch>-linux-gnu, the CUDA include dir))
  $(error USE_CUDNN=1 needs cuDNN 9: `apt-get install libcudnn9-dev-cuda-13` (libcudnn9-dev-cuda-12 for CUDA 12; from NVIDIA's CUDA apt repository), or set CUDNN_HOME=<cuDNN dir with include/ and lib/>; or build with USE_CUDNN=0)
endif
CUDNN_HEADER_DIR := $(patsubst %/,%,$(dir $(CUDNN_HEADER)))
# Debian packages may name it cudnn_version_v9.h; no version file at all only skips this check (the
# library version is checked again at run time by cudnn_state_create)
CUDNN_VERSION_HEADER := $(firstword $(wildcard $(CUDNN_HEADER_DIR)/cudnn_version.h $(CUDNN_HEADER_DIR)/cudnn_version_v9.h))
CUDNN_HEADER_MAJOR := $(if $(CUDNN_VERSION_HEADER),$(shell awk '/define CUDNN_MAJOR /{print $$3}' $(CUDNN_VERSION_HEADER)))
CUDNN_HEADER_VERSION := $(if $(CUDNN_VERSION_HEADER),$(shell awk '/define CUDNN_(MAJOR|MINOR|PATCHLEVEL) /{printf "%s%s", s, $$3; s = "."}' $(CUDNN_VERSION_HEADER)),unknown)
ifneq ($(filter-out 9,$(CUDNN_HEADER_MAJOR)),)
  $(info ✗ $(CUDNN_HEADER) is cuDNN $(CUDNN_HEADER_VERSION), not 9)
  $(error USE_CUDNN=1 needs cuDNN 9: `apt-get install libcudnn9-dev-cuda-13` (or -cuda-12), or set CUDNN_HOME=<cuDNN 9 dir>)
endif
$(info ✓ cudnn.h (cuDNN $(CUDNN_HEADER_VERSION)): $(CUDNN_HEADER))

# ---- libcudnn: -lcudnn where the unversioned name exists, else the soname (some machines only have
# libcudnn.so.9). -L and an rpath only for dirs the linker does not search by itself.
CUDNN_LIB_DIRS_DEFAULT := /usr/lib/x86_64-linux-gnu /usr/lib/aarch64-linux-gnu /usr/lib64 /usr/lib \
    $(CUDA_TOOLKIT_DIR)/lib64 $(CUDA_TOOLKIT_DIR)/lib /usr/local/cuda/lib64
CUDNN_LIB := $(firstword $(wildcard $(foreach d,$(if $(CUDNN_HOME),$(CUDNN_HOME)/lib64 $(CUDNN_HOME)/lib) $(CUDNN_LIB_DIRS_DEFAULT),$(d)/libcudnn.so $(d)/libcudnn.so.9)))
ifeq ($(CUDNN_LIB),)
  $(info ✗ libcudnn.so / libcudnn.so.9 not found (looked in $(if $(CUDNN_HOME),$(CUDNN_HOME)/lib64 $(CUDNN_HOME)/lib )$(CUDNN_LIB_DIRS_DEFAULT)))
  $(error USE_CUDNN=1 needs the cuDNN 9 library: `apt-get install libcudnn9-cuda-13` (or -cuda-12), or set CUDNN_HOME=<cuDNN dir with lib/>; or build with USE_CUDNN=0)
endif
CUDNN_LIB_DIR := $(patsubst %/,%,$(dir $(CUDNN_LIB)))
ifeq ($(notdir $(CUDNN_LIB)),libcudnn.so)
  CUDNN_LDLIBS := -lcudnn
else
  CUDNN_LDLIBS := -l:libcudnn.so.9
endif
ifeq ($(filter $(CUDNN_LIB_DIR),$(CUDNN_LIB_DIRS_DEFAULT)),)
  CUDNN_LDLIBS := -L$(CUDNN_LIB_DIR) -Xlinker -rpath=$(CUDNN_LIB_DIR) $(CUDNN_LDLIBS)
endif
# recent frontends call the driver API and NVRTC directly
CUDNN_LDLIBS += -lcuda -lnvrtc
$(info ✓ libcudnn: $(CUDNN_LIB) (linked with $(CUDNN_LDLIBS)))

# ---- the object. -isystem: the frontend's own warnings are not ours. Host -O1 instead of -O3: nothing
# in this file is hot (a map lookup per call), and it halves the compile of the frontend headers.
# CUDNN_FRONTEND_SKIP_JSON_LIB drops the bundled JSON library (graph serialization, unused): ~35% faster.
NVCC_FLAGS += -DENABLE_CUDNN
CUDNN_NVCC_FLAGS = $(filter-out -O3,$(NVCC_FLAGS)) -O1 -DCUDNN_FRONTEND_SKIP_JSON_LIB -isystem $(CUDNN_FRONTEND_PATH) \
    $(if $(CUDNN_HOME),-isystem $(CUDNN_HOME)/include)
CUDNN_OBJ := $(BUILD_DIR)/cudnn_att.o

$(CUDNN_OBJ): llmc/cudnn_att.cpp llmc/cudnn_att.h llmc/autotune.h llmc/cuda_common.h llmc/utils.h
	@mkdir -p $(dir $@)
	$(NVCC) $(CUDNN_NVCC_FLAGS) -x cu -c $< -o $@

ATTENTION_CUDNN_CHECK := $(BUILD_DIR)/attention_cudnn_check
$(ATTENTION_CUDNN_CHECK): dev/cuda/attention_cudnn_check.cu llmc/cudnn_att.h llmc/cuda_common.h llmc/utils.h $(CUDNN_OBJ)
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCC_FLAGS) $< $(CUDNN_OBJ) $(CUDNN_LDLIBS) -o $@

.PHONY: cudnn attention_cudnn_check
cudnn: $(CUDNN_OBJ)
attention_cudnn_check: $(ATTENTION_CUDNN_CHECK)
	@echo "built $(ATTENTION_CUDNN_CHECK); run it on a GPU machine"

else

.PHONY: cudnn attention_cudnn_check
cudnn attention_cudnn_check:
	@echo "error: '$@' needs USE_CUDNN=1 (make USE_CUDNN=1 $@)" >&2; exit 1

endif
