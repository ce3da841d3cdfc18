"""
Writes FineWeb-shaped parquet files for timing dev/data/fineweb.py without the download: a "text"
column (and an "id" column) of documents made of random Tiny Shakespeare sections, about 3 KB each
(lognormal lengths, as web pages), in files of at most 100 MB of text, in row groups of 20,000 rows.

    python dev/data/bench_parquet.py OUT_DIR [MB]      # default 200 MB
    python dev/data/fineweb.py --parquet OUT_DIR --out /tmp/fineweb_bench

The text repeats one small corpus, so the tokenizer's piece cache hits more often than on real web
text: an upper bound on the tokenizing speed, a fair measure of the reading.
"""
import os
import random
import sys

import pyarrow as pa
import pyarrow.parquet as pq

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit("usage: bench_parquet.py OUT_DIR [MB]")
    out, target = sys.argv[1], float(sys.argv[2] if len(sys.argv) == 3 else 200) * 1e6
    with open(os.path.join(REPO, "dev", "data", "tinyshakespeare.txt"), encoding="utf-8") as f:
        sections = f.read().split("\n\n")
    rng = random.Random(0)
    os.makedirs(out, exist_ok=True)
    total, k = 0, 0
    while total < target:
        docs, size = [], 0
        while size < 100e6 and total + size < target:
            want, parts = int(rng.lognormvariate(7.6, 0.9)) + 50, []
            while sum(map(len, parts)) < want:
                parts.append(rng.choice(sections))
            docs.append("\n\n".join(parts))
            size += len(docs[-1].encode())
        table = pa.table({"text": docs, "id": [f"<urn:{k}:{i}>" for i in range(len(docs))]})
        pq.write_table(table, os.path.join(out, f"{k:03d}_00000.parquet"), row_group_size=20000)
        total, k = total + size, k + 1
    print(f"{total / 1e6:.1f} MB of text in {k} parquet files in {out}")


if __name__ == "__main__":
    main()
