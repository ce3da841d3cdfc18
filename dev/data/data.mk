# Host tools for data preparation (included by the top-level Makefile; built at the repo root).
#   gpt2tok           encode / decode / count with the GPT-2 tokenizer, write gpt2_tokenizer.bin
#   prepare_dataset   text / JSON lines -> token shards; HellaSwag-style JSON lines -> eval file
HOST_TOOLS += gpt2tok prepare_dataset

gpt2tok: dev/data/gpt2tok.cpp $(HOST_LIB_OBJS) $(wildcard llmc/*.h)
	$(CXX) $(CXXFLAGS_HOST) $< $(HOST_LIB_OBJS) $(HOST_LDLIBS) -o $@

prepare_dataset: dev/data/prepare_dataset.cpp dev/data/prepare_dataset.h $(HOST_LIB_OBJS) $(wildcard llmc/*.h)
	$(CXX) $(CXXFLAGS_HOST) $< $(HOST_LIB_OBJS) $(HOST_LDLIBS) -o $@

# The dataset tests include dev/data/prepare_dataset.h and run the two tools as a user would.
build/host/tests/test_prepare_dataset: dev/data/prepare_dataset.h | prepare_dataset gpt2tok
