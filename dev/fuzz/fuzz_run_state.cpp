// libFuzzer harness: run state reader (llmc/run_state.h) with a 3 x 16-float optimizer body, then the
// data loader restore (llm.c's shuffle section: orders and the raw MT19937 state) against two small
// valid shards of 4 windows each, and a few batches from the restored position.
#include <string>
#include <vector>

#include "dev/fuzz/fuzz_common.h"
#include "llmc/run_state.h"

// Two shards of 40 tokens: 4 windows of B*T = 2*4 tokens each. Written once per process.
static const std::string& fuzz_shard_pattern() {
    static const std::string pattern = [] {
        for (int s = 0; s < 2; s++) {
            int32_t header[256] = {SHARD_MAGIC, SHARD_VERSION, 40};
            uint16_t tok[40];
            for (int i = 0; i < 40; i++) tok[i] = (uint16_t)(100 * s + i);
            FILE* f = fopen((fuzz_input_path() + ".shard" + std::to_string(s)).c_str(), "wb");
            if (f == nullptr) abort();
            fwrite(header, 4, 256, f);
            fwrite(tok, 2, 40, f);
            fclose(f);
        }
        return fuzz_input_path() + ".shard*";
    }();
    return pattern;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string& shards = fuzz_shard_pattern();
    const FuzzNoFileLeftOpen no_file_left_open;
    const char* path = fuzz_write_input(data, size);
    std::vector<float> m(16), v(16), master(16);
    DataLoader dl;
    try {
        RunState peek = run_state_peek(path);
        std::vector<HostBuffer> body = {{m.data(), 64}, {v.data(), 64}};
        if (peek.use_master_weights) body.push_back({master.data(), 64});
        RunState rs = run_state_read(path, body, 1, 0);
        dataloader_init(&dl, shards.c_str(), "-i", 2, 4, 0, 1, rs.shuffle);
        run_state_restore_loader(rs, &dl, path);
        for (int i = 0; i < 10; i++) dataloader_next_batch(&dl);
    } catch (const FatalError&) {
    }
    dataloader_free(&dl);
    return 0;
}
