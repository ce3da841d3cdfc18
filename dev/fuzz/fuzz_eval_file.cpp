// libFuzzer harness: multiple-choice eval file reader (llmc/eval_loader.h), then every batch.
#include "dev/fuzz/fuzz_common.h"
#include "llmc/eval_loader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const FuzzNoFileLeftOpen no_file_left_open;
    const char* path = fuzz_write_input(data, size);
    EvalLoader el;
    try {
        eval_loader_init(&el, path, 4, 32, 0, 1);
        for (size_t b = 0; b < eval_loader_num_batches(&el) && b < 8; b++) eval_loader_next_batch(&el);
    } catch (const FatalError&) {
    }
    eval_loader_free(&el);
    return 0;
}
