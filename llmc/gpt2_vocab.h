/*
 * GPT-2's token vocabulary, as every part of the project assumes it: the tokenizers (llmc/gpt2_bpe.h
 * encodes, llmc/tokenizer.h decodes), the data (token shards and eval files: llmc/dataloader.h,
 * llmc/eval_loader.h, dev/data), the model shapes of -e dN / gpt3:cN (llmc/model_file.h) and the
 * samples (train_gpt2.cu). One definition of each number; the Python tools keep their own copies, each
 * naming this header.
 */
#pragma once

constexpr int GPT2_VOCAB_SIZE = 50257;         // V: token ids 0 .. 50256
constexpr int GPT2_EOT = 50256;                // <|endoftext|>: separates documents, pads eval rows, starts samples
constexpr int GPT2_PADDED_VOCAB_SIZE = 50304;  // Vp: V rounded up to a multiple of 128 (rows of wte and the logits)
static_assert(GPT2_EOT == GPT2_VOCAB_SIZE - 1, "<|endoftext|> is the last id");
static_assert(GPT2_PADDED_VOCAB_SIZE % 128 == 0 && GPT2_PADDED_VOCAB_SIZE - GPT2_VOCAB_SIZE < 128, "V rounded up to 128");
