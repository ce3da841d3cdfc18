// libFuzzer harness: run state reader (llmc/run_state.h) with a 3 x 16-float optimizer body, then the
// data loader restore against a small valid shard.
#include <vector>

#include "dev/fuzz/fuzz_common.h"
#include "llmc/run_state.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const char* path = fuzz_write_input(data, size);
    std::vector<float> m(16), v(16), master(16);
    try {
        RunState peek = run_state_peek(path);
        std::vector<HostBuffer> body = {{m.data(), 64}, {v.data(), 64}};
        if (peek.use_master_weights) body.push_back({master.data(), 64});
        RunState rs = run_state_read(path, body, 1, 0);
        (void)rs;
    } catch (const FatalError&) {
    }
    return 0;
}
