// libFuzzer harness: GPT-2 BPE (llmc/gpt2_bpe.h): encode arbitrary bytes and decode back (must round
// trip), and decode the input read as ids. The vocabulary comes from $GPT2_VOCAB_DIR.
#include <cstdlib>
#include <cstring>
#include <vector>

#include "dev/fuzz/fuzz_common.h"
#include "llmc/gpt2_bpe.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static Gpt2Bpe* bpe = [] {
        Gpt2Bpe* b = new Gpt2Bpe();
        gpt2_bpe_load(b, gpt2_vocab_dir_find(nullptr));
        return b;
    }();
    static Gpt2Encoder* enc = [] {
        Gpt2Encoder* e = new Gpt2Encoder();
        gpt2_encoder_init(e, bpe);
        return e;
    }();
    std::vector<uint32_t> ids;
    gpt2_encode(enc, (const char*)data, size, &ids);
    std::string back;
    try {
        gpt2_decode(bpe, ids.data(), ids.size(), &back);
    } catch (const FatalError&) {
        abort();  // ids from the encoder are always in range
    }
    if (back.size() != size || (size > 0 && memcmp(back.data(), data, size) != 0)) abort();
    std::vector<uint32_t> raw(size / 4);
    if (!raw.empty()) memcpy(raw.data(), data, raw.size() * 4);
    try {
        gpt2_decode(bpe, raw.data(), raw.size(), &back);
    } catch (const FatalError&) {
    }
    return 0;
}
