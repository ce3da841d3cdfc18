// libFuzzer harness: model file reader (llmc/model_file.h): header, then the parameters when small.
#include <vector>

#include "dev/fuzz/fuzz_common.h"
#include "llmc/model_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const FuzzNoFileLeftOpen no_file_left_open;
    const char* path = fuzz_write_input(data, size);
    try {
        ModelFileInfo info = model_file_read_header(path);
        const size_t n = gpt2_num_parameters(info.cfg);
        if (n <= ((size_t)1 << 22)) {
            std::vector<float> params(n);
            model_file_read_params(path, info, params.data(), DType::FP32);
        }
    } catch (const FatalError&) {
    }
    return 0;
}
