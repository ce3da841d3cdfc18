// libFuzzer harness: token shard reader (llmc/dataloader.h): init, the first shard's token check, batches.
#include "dev/fuzz/fuzz_common.h"
#include "llmc/dataloader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const FuzzNoFileLeftOpen no_file_left_open;
    const char* path = fuzz_write_input(data, size);
    DataLoader dl;
    try {
        dataloader_init(&dl, path, "-i", 2, 4, 0, 1, size % 2 == 1);
        dataloader_set_vocab(&dl, "-i", 50257);
        dataloader_check_upcoming(&dl);
        for (int i = 0; i < 5; i++) dataloader_next_batch(&dl);
    } catch (const FatalError&) {
    }
    dataloader_free(&dl);
    return 0;
}
