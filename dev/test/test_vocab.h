/*
 * The GPT-2 vocabulary for the tokenizer host tests: test_bpe() loads it once from test_vocab_dir()
 * (test_util.h) and returns nullptr when it is missing; REQUIRE_VOCAB() then fails the test (never
 * skips) with a message saying to set GPT2_VOCAB_DIR. test_encode(s): the ids of s with that vocabulary.
 */
#pragma once

#include <unistd.h>

#include <string>
#include <vector>

#include "llmc/gpt2_bpe.h"
#include "test_util.h"

inline const Gpt2Bpe* test_bpe() {
    static Gpt2Bpe* loaded = [] {
        const std::string dir = test_vocab_dir();
        if (access((dir + "/encoder.json").c_str(), R_OK) != 0 || access((dir + "/vocab.bpe").c_str(), R_OK) != 0) {
            return (Gpt2Bpe*)nullptr;
        }
        Gpt2Bpe* b = new Gpt2Bpe();
        gpt2_bpe_load(b, dir);
        return b;
    }();
    return loaded;
}

inline std::vector<uint32_t> test_encode(const std::string& s) {
    Gpt2Encoder enc;
    gpt2_encoder_init(&enc, test_bpe());
    std::vector<uint32_t> ids;
    gpt2_encode(&enc, s.data(), s.size(), &ids);
    gpt2_encoder_free(&enc);
    return ids;
}

#define REQUIRE_VOCAB() ASSERT_NE(test_bpe(), nullptr) << "GPT-2 vocabulary not found in '" << test_vocab_dir() \
                                                       << "': set GPT2_VOCAB_DIR"
