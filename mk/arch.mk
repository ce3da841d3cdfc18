# GPU architecture for nvcc, shared by the root Makefile and dev/cuda/Makefile: GPU_COMPUTE_CAPABILITY
# from the command line, else read from nvidia-smi, else 90 (H100/H200). Never silently empty: a
# value that is not a number >= 80 (bf16 needs Ampere or newer) stops the build.
# Sets GPU_COMPUTE_CAPABILITY, CC_SOURCE (printed by the including Makefile) and ARCH_FLAGS.
ifeq ($(origin GPU_COMPUTE_CAPABILITY),undefined)
  DETECTED_CC := $(shell nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n1 | tr -d '. \r')
  GPU_COMPUTE_CAPABILITY := $(if $(DETECTED_CC),$(DETECTED_CC),90)
  CC_SOURCE := $(if $(DETECTED_CC),detected by nvidia-smi,default: no nvidia-smi)
else
  CC_SOURCE := set by user
endif
ifeq ($(shell [[ "$(GPU_COMPUTE_CAPABILITY)" =~ ^[0-9]+$$ ]] && [ $(GPU_COMPUTE_CAPABILITY) -ge 80 ] && echo ok),)
  $(error GPU_COMPUTE_CAPABILITY must be a number >= 80 (bf16 needs Ampere or newer), got '$(GPU_COMPUTE_CAPABILITY)')
endif
# Hopper (90) builds for sm_90a, the target with wgmma: llmc/attention.cuh's tensor-core kernels use
# it, and its launchers pick the wgmma kernels by LLMC_SM90A; other kernels compile as for sm_90.
# sm_90a machine code runs on compute capability 9.0 only, which is what 90 names; other values get
# the plain target and the mma.sync attention.
ifeq ($(GPU_COMPUTE_CAPABILITY),90)
  ARCH_FLAGS := -gencode arch=compute_90a,code=sm_90a -DLLMC_SM90A
else
  ARCH_FLAGS := -gencode arch=compute_$(GPU_COMPUTE_CAPABILITY),code=sm_$(GPU_COMPUTE_CAPABILITY)
endif
