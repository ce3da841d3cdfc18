// libFuzzer harness: debug state reader (dev/test/debug_state.h) for a tiny model configuration.
#include "dev/fuzz/fuzz_common.h"
#include "dev/test/debug_state.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const FuzzNoFileLeftOpen no_file_left_open;
    const char* path = fuzz_write_input(data, size);
    const GPT2Config cfg = {8, 10, 16, 1, 1, 4};  // maxT, V, Vp, L, NH, C
    try {
        DebugState s = debug_state_read(path, cfg);
        (void)s;
    } catch (const FatalError&) {
    }
    return 0;
}
