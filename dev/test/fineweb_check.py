"""
dev/data/fineweb.py on small parquet files written here (offline): its shards must equal, file for
file and byte for byte, those of llm.c's fineweb.py procedure run with tiktoken over the same rows
(dev/test/llmc_data_reference.py): names, val shard 0, shard sizes, documents split across shards.
Bad inputs (no text column, a truncated file, a null text after shards were written, offline without
the files) each give one line, exit code 1 and no shard. Prints "N passed, N failed".
"""
import glob
import os
import random
import subprocess
import sys
import tempfile

import pyarrow as pa
import pyarrow.parquet as pq

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FINEWEB = [sys.executable, os.path.join(REPO, "dev", "data", "fineweb.py")]
REFERENCE = [sys.executable, os.path.join(REPO, "dev", "test", "llmc_data_reference.py")]
passed = failed = 0


def check(name, ok, detail=""):
    global passed, failed
    if ok:
        passed += 1
        print(f"PASS  {name}")
    else:
        failed += 1
        print(f"FAIL  {name}{': ' + detail if detail else ''}")


def documents(rng, n):
    # documents of at most about 45 tokens: llm.c's loop places a document in at most two shards
    words = ["the", "of", "and", "FineWeb", "caf\u00e9", "\u4f60\u597d", "\U0001F600", "1234", "  ", "\n", "don't",
             "https://ex.com/?b", "\t", "\u00a0", "x" * 9, "!!", "It's", "we'll"]
    docs = []
    for i in range(n):
        k = rng.choice([0, 1, 3, 8, 12]) if i % 7 else 0   # every 7th document is empty (llm.c: EOT alone)
        docs.append("".join(rng.choice(words) + rng.choice([" ", "", "\n"]) for _ in range(k)))
    return docs


def write_parquet(path, docs, row_group_size=None, **extra_columns):
    table = pa.table({"id": [f"<urn:{i}>" for i in range(len(docs))], "text": docs, **extra_columns})
    pq.write_table(table, path, row_group_size=row_group_size)


def shard_files(d):
    return {os.path.basename(p): open(p, "rb").read() for p in sorted(glob.glob(os.path.join(d, "*.bin")))}


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def one_error_line(r):
    lines = [l for l in r.stderr.splitlines() if l.strip()]
    return r.returncode == 1 and len(lines) == 1 and lines[0].startswith("error: ")


def main():
    rng = random.Random(1234)
    tmp = tempfile.mkdtemp(prefix="fineweb_check_")
    pqdir = os.path.join(tmp, "parquet", "sample", "10BT")
    os.makedirs(pqdir)
    # three files (llm.c reads them in name order), one with several row groups and a large_string column
    write_parquet(os.path.join(pqdir, "000_00000.parquet"), documents(rng, 120), row_group_size=50)
    write_parquet(os.path.join(pqdir, "001_00000.parquet"), documents(rng, 3))
    docs2 = documents(rng, 90)
    pq.write_table(pa.table({"text": pa.array(docs2, type=pa.large_string())}), os.path.join(pqdir, "002_00000.parquet"))
    files = sorted(glob.glob(os.path.join(pqdir, "*.parquet")))

    # a shard size that a run of whole documents fills exactly (the next shard starts with a document)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from llmc_data_reference import gpt2_encoding
    enc, total, exact = gpt2_encoding(), 0, None
    for text in pq.read_table(files[0]).column("text").to_pylist():
        total += 1 + len(enc.encode_ordinary(text))
        if total >= 60:
            exact = total
            break
    features = run([os.path.join(REPO, "prepare_dataset"), "--features"]).stdout.strip()
    check("prepare_dataset reads parquet itself (built with the pyarrow wheel's Arrow / Parquet)",
          features == "parquet: yes", features)
    readers = ["cpp", "python"] if features == "parquet: yes" else ["python"]
    for reader, shard_size, kind, name in [(r, 97, "classic", "fineweb") for r in readers] + [
            ("python", 64, "edu", "edu_fineweb"), (readers[0], exact, "classic", "fineweb"),
            (readers[0], 10**8, "classic", "fineweb")]:
        ours, ref = os.path.join(tmp, f"ours_{reader}_{shard_size}"), os.path.join(tmp, f"ref_{shard_size}")
        r = run(FINEWEB + ["--reader", reader, "-t", kind, "-s", str(shard_size), "--parquet",
                           os.path.join(tmp, "parquet"), "--out", ours, "-q"])
        check(f"fineweb.py --reader {reader} -t {kind} -s {shard_size} runs", r.returncode == 0, r.stderr[-2000:])
        rr = run(REFERENCE + ["fineweb", ref, name, str(shard_size)] + files)
        check(f"reference -s {shard_size} runs", rr.returncode == 0, rr.stderr[-2000:])
        a, b = shard_files(ours), shard_files(ref)
        check(f"-s {shard_size}: {len(b)} shards named as llm.c's ({', '.join(list(b)[:3])}...)",
              sorted(a) == sorted(b), f"ours {sorted(a)} vs llm.c's {sorted(b)}")
        same = [n for n in b if a.get(n) == b[n]]
        check(f"-s {shard_size}: every shard identical to llm.c's, token for token", len(same) == len(b) and len(a) == len(b),
              f"{len(same)} of {len(b)} identical")
        if shard_size == 97:
            check("several shards, shard 0 is val", len(b) > 3 and f"{name}_val_000000.bin" in b
                  and f"{name}_train_000001.bin" in b)

    # bad inputs: one line, exit 1, nothing written
    def expect_refused(label, parquet_args, want, env=None):
        out = os.path.join(tmp, "bad_" + label.replace(" ", "_"))
        r = run(FINEWEB + parquet_args + ["--out", out, "-q"], env=env)
        check(f"{label}: one error line, exit 1", one_error_line(r) and want in r.stderr, f"rc {r.returncode}: {r.stderr!r}")
        left = [n for n in os.listdir(tmp) if n.startswith(".bad_") or n == os.path.basename(out)]
        check(f"{label}: no shard written", not glob.glob(os.path.join(out, "*")) and
              all(n == os.path.basename(out) for n in left), f"left: {left} {glob.glob(os.path.join(out, '*'))}")

    notext = os.path.join(tmp, "notext.parquet")
    pq.write_table(pa.table({"content": ["a", "b"]}), notext)
    raw = open(files[0], "rb").read()
    truncated = os.path.join(tmp, "truncated.parquet")
    open(truncated, "wb").write(raw[: len(raw) * 2 // 3])
    # a null text in the last file, after the first files' documents were streamed and shards written
    nulls = os.path.join(tmp, "zz_null.parquet")
    pq.write_table(pa.table({"text": ["fine", None, "x"]}), nulls)
    for reader in readers:
        expect_refused(f"{reader} no text column", ["--reader", reader, "--parquet", notext], "has no 'text' column")
        expect_refused(f"{reader} truncated file", ["--reader", reader, "--parquet", files[1], truncated],
                       "truncated.parquet' (truncated or not parquet?)")
        expect_refused(f"{reader} null text mid-stream", ["--reader", reader, "-s", "50", "--parquet"] + files + [nulls],
                       "zz_null.parquet' row 1 has no text (null)")
    env = dict(os.environ, HF_HUB_OFFLINE="1", HF_HOME=os.path.join(tmp, "hf_home"))
    expect_refused("offline download", [], "cannot download HuggingFaceFW/fineweb sample/10BT from the Hugging Face Hub", env)
    r = run(FINEWEB + ["-m", "llama-3"])
    check("-m llama-3 refused", one_error_line(r) and "only gpt-2" in r.stderr, r.stderr)

    subprocess.run(["rm", "-rf", tmp])
    print(f"{passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
