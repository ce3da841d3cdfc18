// Prints what llmc/model_file.h makes of each model descriptor given on the command line, one line each:
//   <desc> L=<layers> C=<channels> NH=<heads> maxT=<max_seq_len> params=<count with the padded vocabulary>
//   <desc> not-a-descriptor          (gpt2_config_from_descriptor returned false: a checkpoint path)
// A bad descriptor ends the program with gpt2_config_from_descriptor's fatal() message and exit code 1.
// dev/test/descriptor_check.sh compares this with train_gpt2.py's config_from_descriptor.
//
//   model_config --init <desc> [threads] [seed]
// runs the trainer's random init of <desc> on the host (bf16, as the default build; threads default: all
// cores, up to 32 as the trainer; seed 42), prints the trainer's init line and an FNV-1a 64 hash of the
// parameters. It times the init without a GPU.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>

#include "llmc/model_file.h"

static int time_init(int argc, char** argv) {
    if (argc < 3 || argc > 5) fatal("usage: model_config --init <descriptor> [threads] [seed]");
    GPT2Config c{};
    if (!gpt2_config_from_descriptor(argv[2], &c)) fatal("--init %s: not a model descriptor", argv[2]);
    int threads = (int)std::min(32u, std::max(1u, std::thread::hardware_concurrency()));
    if (argc >= 4) threads = atoi(argv[3]);
    if (threads < 1) fatal("--init: threads must be a positive integer, got '%s'", argv[3]);
    const uint64_t seed = argc >= 5 ? strtoull(argv[4], nullptr, 10) : 42;
    const size_t n = gpt2_num_parameters(c);
    std::unique_ptr<uint16_t[]> p(new uint16_t[n]);
    const auto t0 = std::chrono::steady_clock::now();
    const int used = gpt2_init_params_random(c, seed, DType::BF16, p.get(), threads);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    printf("init: random weights of %s (%.1fM parameters) in %.1f s on %d threads, seed %u\n", argv[2], n / 1e6, s,
           used, (uint32_t)seed);
    uint64_t h = 0xcbf29ce484222325ull;
    const unsigned char* b = reinterpret_cast<const unsigned char*>(p.get());
    for (size_t i = 0; i < n * 2; i++) h = (h ^ b[i]) * 0x100000001b3ull;
    printf("bf16 parameters: fnv1a64 %016llx\n", (unsigned long long)h);
    return 0;
}

int main(int argc, char** argv) {
    if (argc >= 2 && strcmp(argv[1], "--init") == 0) return time_init(argc, argv);
    for (int i = 1; i < argc; i++) {
        GPT2Config c{};
        if (!gpt2_config_from_descriptor(argv[i], &c)) {
            printf("%s not-a-descriptor\n", argv[i]);
            continue;
        }
        printf("%s L=%d C=%d NH=%d maxT=%d params=%zu\n", argv[i], c.num_layers, c.channels, c.num_heads,
               c.max_seq_len, gpt2_num_parameters(c));
    }
    return 0;
}
