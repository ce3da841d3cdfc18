"""
Reference token shards made the way llm.c's data scripts make them, with tiktoken, for the checks of
dev/data/tinyshakespeare.sh and dev/data/fineweb.py (dev/test/tinyshakespeare_check.sh,
dev/test/fineweb_check.sh). Written from llm.c's procedure, not from its code:

  tinyshakespeare TXT OUT_DIR
      text.split("\\n\\n"); each section is <|endoftext|> + encode(section + "\\n\\n"), the last section
      without the "\\n\\n"; the first 32,768 tokens -> tiny_shakespeare_val.bin, the rest ->
      tiny_shakespeare_train.bin.
  fineweb OUT_DIR NAME SHARD_SIZE PARQUET...
      rows of the "text" column in file order; each document is <|endoftext|> + encode(text); a shard
      is written when a document does not fit in the tokens left (the document's head fills it, its tail
      starts the next shard); shard 0 is NAME_val_000000.bin, then NAME_train_000001.bin, ...; the
      last, partial shard is written if it holds any token.

The GPT-2 encoding is built offline from dev/data/gpt2 (the files tiktoken downloads, checked against
tiktoken's own hashes of them) with tiktoken's GPT-2 pattern: the same ids as tiktoken.get_encoding("gpt2").
Shard files: 256 int32 header {20240520, 1, n, 0...} then n uint16 ids.
"""
import os
import sys

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def gpt2_encoding():
    import tiktoken
    from tiktoken.load import data_gym_to_mergeable_bpe_ranks
    from tiktoken_ext import openai_public

    vocab = os.environ.get("GPT2_VOCAB_DIR") or os.path.join(REPO, "dev", "data", "gpt2")
    ranks = data_gym_to_mergeable_bpe_ranks(
        vocab_bpe_file=os.path.join(vocab, "vocab.bpe"),
        encoder_json_file=os.path.join(vocab, "encoder.json"),
        vocab_bpe_hash="1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5",
        encoder_json_hash="196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783",
    )
    return tiktoken.Encoding("gpt2", pat_str=openai_public.r50k_pat_str, mergeable_ranks=ranks,
                             special_tokens={"<|endoftext|>": 50256}, explicit_n_vocab=50257)


EOT = 50256  # GPT2_EOT in llmc/gpt2_vocab.h


def write_shard(path, tokens):
    tokens = np.asarray(tokens, dtype=np.int64)
    assert len(tokens) < 2**31 and (tokens >= 0).all() and (tokens < 2**16).all()
    header = np.zeros(256, dtype=np.int32)
    header[0], header[1], header[2] = 20240520, 1, len(tokens)
    with open(path, "wb") as f:
        f.write(header.tobytes())
        f.write(tokens.astype(np.uint16).tobytes())


def tinyshakespeare(txt, out_dir):
    enc = gpt2_encoding()
    with open(txt, "r", encoding="utf-8") as f:
        text = f.read()
    sections = text.split("\n\n")
    tokens = []
    for i, s in enumerate(sections):
        tokens.append(EOT)
        tokens.extend(enc.encode_ordinary(s if i == len(sections) - 1 else s + "\n\n"))
    os.makedirs(out_dir, exist_ok=True)
    write_shard(os.path.join(out_dir, "tiny_shakespeare_val.bin"), tokens[:32768])
    write_shard(os.path.join(out_dir, "tiny_shakespeare_train.bin"), tokens[32768:])
    print(f"reference: {len(tokens[:32768])} val tokens, {len(tokens[32768:])} train tokens")


def fineweb(out_dir, name, shard_size, parquet_files):
    import pyarrow.parquet as pq

    enc = gpt2_encoding()
    os.makedirs(out_dir, exist_ok=True)
    shard, buf = 0, []

    def flush():
        nonlocal shard, buf
        split = "val" if shard == 0 else "train"
        write_shard(os.path.join(out_dir, f"{name}_{split}_{shard:06d}.bin"), buf)
        shard, buf = shard + 1, []

    for path in parquet_files:
        for text in pq.read_table(path, columns=["text"]).column("text").to_pylist():
            doc = [EOT] + enc.encode_ordinary(text)
            assert len(doc) <= shard_size, "llm.c's loop cannot place a document longer than a shard"
            if len(buf) + len(doc) < shard_size:
                buf.extend(doc)
            else:
                room = shard_size - len(buf)
                buf.extend(doc[:room])
                flush()
                buf = doc[room:]
    if buf:
        flush()
    print(f"reference: {shard} shards")


if __name__ == "__main__":
    cmd = sys.argv[1] if len(sys.argv) > 1 else ""
    if cmd == "tinyshakespeare" and len(sys.argv) == 4:
        tinyshakespeare(sys.argv[2], sys.argv[3])
    elif cmd == "fineweb" and len(sys.argv) >= 6:
        fineweb(sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5:])
    else:
        sys.exit("usage: llmc_data_reference.py tinyshakespeare TXT OUT_DIR | fineweb OUT_DIR NAME SHARD_SIZE PARQUET...")
