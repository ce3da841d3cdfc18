# Host tools for data preparation (included by the top-level Makefile; built at the repo root).
#   gpt2tok           encode / decode / count with the GPT-2 tokenizer, write gpt2_tokenizer.bin
#   prepare_dataset   text / JSON lines / framed stream / parquet -> token shards; HellaSwag-style JSON
#                     lines -> eval file
HOST_TOOLS += gpt2tok prepare_dataset

# Parquet input (dev/data/parquet_text.cpp) links the Arrow / Parquet C++ libraries that the pyarrow
# wheel ships (Debian bookworm packages neither), with an rpath to them; found without importing
# pyarrow (its headers need C++20: that one file is built so). Without them prepare_dataset is built without parquet input (PARQUET=0 forces that).
PARQUET ?= 1
ifeq ($(PARQUET),1)
PYARROW_DIR := $(shell python3 -c "import importlib.util as u; s = u.find_spec('pyarrow'); print(s.submodule_search_locations[0] if s else '')" 2>/dev/null)
PARQUET_SO := $(if $(PYARROW_DIR),$(firstword $(wildcard $(PYARROW_DIR)/libparquet.so.*)))
ARROW_SO := $(if $(PYARROW_DIR),$(firstword $(wildcard $(PYARROW_DIR)/libarrow.so.*)))
endif
ifneq ($(and $(PARQUET_SO),$(ARROW_SO),$(wildcard $(PYARROW_DIR)/include/parquet/arrow/reader.h)),)
PARQUET_FOUND := 1
PARQUET_OBJ := build/host/dev/data/parquet_text.o
PARQUET_LIBS := $(ARROW_SO) $(PARQUET_SO) -Wl,-rpath,$(PYARROW_DIR)
PARQUET_DEFINE := -DPREPARE_DATASET_PARQUET
endif

.PHONY: data-info
data-info:  # (quiet under make -s, as the scripts call it)
	@$(if $(findstring s,$(firstword -$(MAKEFLAGS))),true,echo) "$(if $(PARQUET_FOUND),✓ parquet input (Arrow / Parquet from $(PYARROW_DIR)),✗ parquet input (pip install pyarrow$(if $(filter 0,$(PARQUET)),; PARQUET=0 given)))"

$(PARQUET_OBJ): dev/data/parquet_text.cpp dev/data/parquet_text.h dev/data/prepare_dataset.h $(PARQUET_SO) $(wildcard llmc/*.h)
	@mkdir -p $(dir $@)
	$(CXX) $(CXXFLAGS_HOST) -std=c++20 -isystem $(PYARROW_DIR)/include -c $< -o $@  # Arrow 26 headers need C++20

# both link build/host/libllmc.a (the top-level Makefile): only the objects they call
gpt2tok: dev/data/gpt2tok.cpp $(HOST_LIB) $(wildcard llmc/*.h)
	$(CXX) $(CXXFLAGS_HOST) $< $(HOST_LIB) $(HOST_LDLIBS) -o $@

prepare_dataset: dev/data/prepare_dataset.cpp dev/data/prepare_dataset.h $(HOST_LIB) $(PARQUET_OBJ) $(wildcard llmc/*.h) | data-info
	$(CXX) $(CXXFLAGS_HOST) $(PARQUET_DEFINE) $< $(PARQUET_OBJ) $(HOST_LIB) $(HOST_LDLIBS) $(PARQUET_LIBS) -o $@

# The dataset tests include dev/data/prepare_dataset.h and run the two tools as a user would.
build/host/tests/test_prepare_dataset: dev/data/prepare_dataset.h | prepare_dataset gpt2tok
