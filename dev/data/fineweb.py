"""
FineWeb / FineWeb-Edu as GPT-2 token shards, named and cut as llm.c's dev/data/fineweb.py names and
cuts them, with prepare_dataset's multi-core tokenizer:

    python dev/data/fineweb.py                  # FineWeb sample-10BT  -> dev/data/fineweb10B/
    python dev/data/fineweb.py -t edu -v 100B   # FineWeb-Edu sample-100BT -> dev/data/edu_fineweb100B/

  -t classic|edu   HuggingFaceFW/fineweb or HuggingFaceFW/fineweb-edu (default classic)
  -v 10B|100B      the sample-10BT or sample-100BT subset (default 10B)
  -s N             tokens per shard (default 1e8)
  --parquet P...   read these parquet files (or every *.parquet under these directories) instead of
                   downloading
  --out DIR        output directory (default dev/data/<fineweb10B | fineweb100B | edu_fineweb10B |
                   edu_fineweb100B>, as llm.c)
  -j N             tokenizer threads (default: all cores)

Output: <name>_val_000000.bin (the first 1e8 tokens), then <name>_train_000001.bin, ... with name
fineweb or edu_fineweb. Each document (a row of the "text" column, files in name order, rows in
order) is <|endoftext|> + its tokens; a document that does not fit in what is left of a shard fills it
and continues in the next one; the last shard holds the remainder. The set is committed all at once
(prepare_dataset shards).

Download: huggingface_hub's snapshot_download of the subset's parquet files (sample/10BT/*.parquet)
into the Hugging Face cache ($HF_HOME), resumed if interrupted. Offline, without those files in the
cache: one line and exit code 1.

Reading: prepare_dataset reads the parquet files itself (Arrow / Parquet C++, built in when the
pyarrow wheel is installed: `prepare_dataset --features`), on a thread of its own while the tokenizer
threads work. `--reader python` (the fallback when prepare_dataset was built without them) reads them
here with pyarrow and streams the text column, a batch of rows at a time and without a per-row Python
step, into `prepare_dataset shards --format framed -` (the stream format is described in
dev/data/prepare_dataset.h); measured slower (dev/data/README.md). Either way every file is opened
first: a file without a "text" column or that cannot be read stops the run with one line and exit code
1 before any work; a null text found later stops it the same way, and no shard is committed.
"""
import argparse
import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATA_DIR = os.path.join(REPO, "dev", "data")

# (type, version) -> (local directory, Hub subset); the names llm.c's script uses
SUBSETS = {
    ("classic", "10B"): ("fineweb10B", "sample-10BT"),
    ("classic", "100B"): ("fineweb100B", "sample-100BT"),
    ("edu", "10B"): ("edu_fineweb10B", "sample-10BT"),
    ("edu", "100B"): ("edu_fineweb100B", "sample-100BT"),
}
REPOS = {"classic": ("HuggingFaceFW/fineweb", "fineweb"), "edu": ("HuggingFaceFW/fineweb-edu", "edu_fineweb")}

ROWS_PER_BATCH = 8192   # rows streamed at a time (tens of MB of FineWeb text)
FRAMED_ABORT = (1 << 64) - 1


def die(msg):
    print(f"error: {msg}", file=sys.stderr)
    sys.exit(1)


def first_line(e):
    """An exception as a short one-line reason: its type and first sentence."""
    lines = str(e).strip().splitlines()
    text = lines[0] if lines else ""
    cut = text.find(". ")
    return f"{type(e).__name__}: {text[:cut + 1] if cut > 0 else text}"


def download(repo_id, subset):
    """The subset's parquet files from the Hub (or the local cache), in name order."""
    try:
        from huggingface_hub import snapshot_download
    except ImportError:
        die("huggingface_hub is not installed (pip install huggingface_hub); or give the parquet files with --parquet")
    folder = "sample/" + subset[len("sample-"):]          # sample-10BT -> sample/10BT
    print(f"downloading {repo_id} {folder}/*.parquet into the Hugging Face cache (resumes if interrupted)...",
          flush=True)
    try:
        root = snapshot_download(repo_id, repo_type="dataset", allow_patterns=[folder + "/*.parquet"])
    except Exception as e:  # offline, no such repo, disk full...: one line, not a traceback
        die(f"cannot download {repo_id} {folder} from the Hugging Face Hub (offline?): {first_line(e)}; "
            f"with the parquet files at hand, give them with --parquet")
    files = list_parquet([os.path.join(root, folder)])
    if not files:
        die(f"the download of {repo_id} {folder} holds no parquet file")
    return files


def list_parquet(paths):
    files = []
    for p in paths:
        if os.path.isdir(p):
            found = []
            for d, _, names in os.walk(p):
                found += [os.path.join(d, n) for n in names if n.endswith(".parquet")]
            if not found:
                die(f"--parquet '{p}': no .parquet file in that directory")
            files += sorted(found, key=lambda f: os.path.relpath(f, p))
        elif os.path.isfile(p):
            files.append(p)
        else:
            die(f"--parquet '{p}': no such file or directory")
    return files


def open_all(files):
    """Opens every file first (footer and schema), so a truncated file or one without a text column
    stops the run before any work. Returns the ParquetFiles and the number of rows."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    opened, rows = [], 0
    for f in files:
        try:
            pf = pq.ParquetFile(f)
        except Exception as e:
            die(f"cannot read parquet file '{f}' (truncated or not parquet?): {first_line(e)}")
        schema = pf.schema_arrow
        if "text" not in schema.names:
            die(f"parquet file '{f}' has no 'text' column (columns: {', '.join(schema.names)})")
        kind = schema.field("text").type
        if not (pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_string_view(kind)):
            die(f"parquet file '{f}': the 'text' column holds {kind}, not strings")
        opened.append(pf)
        rows += pf.metadata.num_rows
    return opened, rows


def frames(paths, parquet_files):
    """Yields the framed stream's pieces: per batch of rows, its header (count and offsets) and its text."""
    import numpy as np
    import pyarrow as pa
    for path, pf in zip(paths, parquet_files):
        row = 0
        for batch in pf.iter_batches(batch_size=ROWS_PER_BATCH, columns=["text"]):
            col = batch.column(0).cast(pa.large_string())
            n = len(col)
            if col.null_count:
                bad = row + col.is_null().to_numpy(zero_copy_only=False).argmax()
                raise ValueError(f"parquet file '{path}' row {bad} has no text (null)")
            _, offsets_buf, data_buf = col.buffers()
            offsets = np.frombuffer(offsets_buf, dtype="<i8", count=n + 1, offset=col.offset * 8)
            head = np.empty(n + 2, dtype="<u8")
            head[0] = n
            head[1:] = offsets - offsets[0]
            yield head.tobytes()
            if data_buf is not None and offsets[n] > offsets[0]:
                yield memoryview(data_buf)[offsets[0]:offsets[n]]
            row += n


def main():
    ap = argparse.ArgumentParser(description="FineWeb / FineWeb-Edu -> GPT-2 token shards (llm.c's names and sizes)")
    ap.add_argument("-t", "--type", default="classic", choices=["classic", "edu"])
    ap.add_argument("-v", "--version", default="10B", choices=["10B", "100B"])
    ap.add_argument("-m", "--model_desc", default="gpt-2", help="gpt-2 only")
    ap.add_argument("-s", "--shard_size", type=int, default=10**8, help="tokens per shard (default 1e8)")
    ap.add_argument("--parquet", nargs="+", metavar="P", help="parquet files or directories instead of downloading")
    ap.add_argument("--out", help="output directory (default: dev/data/<llm.c's directory>)")
    ap.add_argument("-j", type=int, help="tokenizer threads (default: all cores)")
    ap.add_argument("-q", action="store_true", help="no progress line")
    ap.add_argument("--reader", choices=["cpp", "python"], help="who reads the parquet files (default: cpp when "
                    "prepare_dataset has parquet input built in, else python)")
    args = ap.parse_args()
    if args.model_desc != "gpt-2":
        die(f"-m {args.model_desc}: only gpt-2 is supported")
    if args.shard_size < 1:
        die(f"-s must be a positive number of tokens, got {args.shard_size}")
    local_dir, subset = SUBSETS[(args.type, args.version)]
    repo_id, name = REPOS[args.type]
    out = args.out or os.path.join(DATA_DIR, local_dir)
    if subprocess.run(["make", "-s", "-C", REPO, "prepare_dataset"]).returncode != 0:
        die("building prepare_dataset failed")
    tool = os.path.join(REPO, "prepare_dataset")
    built_in = subprocess.run([tool, "--features"], capture_output=True, text=True).stdout.strip() == "parquet: yes"
    reader = args.reader or ("cpp" if built_in else "python")
    if reader == "cpp" and not built_in:
        die("--reader cpp: prepare_dataset was built without parquet input (pip install pyarrow, then make prepare_dataset)")
    if reader == "python":
        try:
            import numpy  # noqa: F401
            import pyarrow  # noqa: F401
        except ImportError as e:
            die(f"{e.name} is not installed (pip install pyarrow numpy)")

    files = list_parquet(args.parquet) if args.parquet else download(repo_id, subset)
    cmd = [tool, "shards", "--out", out, "--name", name, "--shard-size", str(args.shard_size)]
    if args.j:
        cmd += ["-j", str(args.j)]
    if args.q:
        cmd += ["-q"]
    size = sum(os.path.getsize(f) for f in files)
    print(f"{len(files)} parquet file{'s' if len(files) != 1 else ''}, {size / 1e9:.2f} GB -> "
          f"{out}/{name}_{{val,train}}_*.bin (parquet read by {'prepare_dataset' if reader == 'cpp' else 'pyarrow'})",
          flush=True)
    if reader == "cpp":
        sys.exit(subprocess.run(cmd + ["--format", "parquet"] + files).returncode)
    parquet_files, rows = open_all(files)
    cmd += ["--format", "framed", "--expect-documents", str(rows)]
    proc = subprocess.Popen(cmd + ["-"], stdin=subprocess.PIPE)
    try:
        import fcntl
        fcntl.fcntl(proc.stdin.fileno(), 1031, 1 << 20)  # F_SETPIPE_SZ: 1 MiB, fewer switches between the two
    except (ImportError, OSError):
        pass
    failure = None
    try:
        for piece in frames(files, parquet_files):
            proc.stdin.write(piece)
        proc.stdin.write((0).to_bytes(8, "little"))           # end marker: the input is complete
    except BrokenPipeError:
        pass                                                  # prepare_dataset stopped and said why
    except Exception as e:
        failure = e if isinstance(e, ValueError) else f"reading the parquet files failed: {first_line(e)}"
        try:
            proc.stdin.write(FRAMED_ABORT.to_bytes(8, "little"))  # prepare_dataset exits 1 and writes nothing
        except BrokenPipeError:
            pass
    try:
        proc.stdin.close()
    except BrokenPipeError:
        pass
    rc = proc.wait()
    if failure is not None:
        die(str(failure))
    sys.exit(rc)


if __name__ == "__main__":
    main()
