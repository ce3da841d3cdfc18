// libFuzzer harness: decode-only tokenizer file reader (llmc/tokenizer.h), then printing every token.
#include "dev/fuzz/fuzz_common.h"
#include "llmc/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static FILE* null = fopen("/dev/null", "w");  // opened before the check below: it stays open
    const FuzzNoFileLeftOpen no_file_left_open;
    const char* path = fuzz_write_input(data, size);
    Tokenizer t;
    try {
        if (tokenizer_init(&t, path)) {
            for (uint32_t id = 0; id < t.vocab_size + 2 && id < 4096; id++) tokenizer_print(null, &t, id);
        }
    } catch (const FatalError&) {
    }
    tokenizer_free(&t);
    return 0;
}
