# NCCL and OpenMPI detection, shared by the root Makefile and dev/cuda/Makefile. NO_MULTI_GPU and
# NO_USE_MPI default to what is installed; asking for what is missing stops the build with the fix.
# Sets NCCL_HEADER, NO_MULTI_GPU, MPI_INCLUDE_DIR, MPI_LIB_DIR, NO_USE_MPI.
NCCL_HEADER := $(firstword $(wildcard /usr/include/nccl.h /usr/local/cuda/include/nccl.h $(NCCL_HOME)/include/nccl.h))
ifeq ($(origin NO_MULTI_GPU),undefined)
  NO_MULTI_GPU := $(if $(NCCL_HEADER),0,1)
endif
ifeq ($(filter $(NO_MULTI_GPU),0 1),)
  $(error NO_MULTI_GPU must be 0 or 1, got '$(NO_MULTI_GPU)')
endif
ifeq ($(NO_MULTI_GPU)$(NCCL_HEADER),0)
  $(error NO_MULTI_GPU=0 but nccl.h was not found: install libnccl-dev (or set NCCL_HOME), or build with NO_MULTI_GPU=1)
endif

MPI_INCLUDE_DIR := $(firstword $(wildcard /usr/lib/x86_64-linux-gnu/openmpi/include /usr/include/openmpi /usr/lib/aarch64-linux-gnu/openmpi/include $(MPI_HOME)/include))
MPI_LIB_DIR := $(firstword $(wildcard /usr/lib/x86_64-linux-gnu/openmpi/lib /usr/lib/aarch64-linux-gnu/openmpi/lib $(MPI_HOME)/lib))
ifeq ($(origin NO_USE_MPI),undefined)
  NO_USE_MPI := $(if $(and $(MPI_INCLUDE_DIR),$(filter 0,$(NO_MULTI_GPU))),0,1)
endif
ifeq ($(filter $(NO_USE_MPI),0 1),)
  $(error NO_USE_MPI must be 0 or 1, got '$(NO_USE_MPI)')
endif
ifeq ($(NO_USE_MPI)$(MPI_INCLUDE_DIR),0)
  $(error NO_USE_MPI=0 but OpenMPI headers were not found: apt-get install libopenmpi-dev, or build with NO_USE_MPI=1)
endif
