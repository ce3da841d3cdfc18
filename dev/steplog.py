"""
Reads the step lines of a training log: the one parser of them for every script and check. A step line
is what the trainer prints for each update (docs/formats.md "Step line"; llm.c's train_gpt2cu,
train_gpt2.py and dev/torch_baseline.py print the same):

    step %4d/%d | loss %7.6f (%+.2fz)| norm %6.4f (%+.2fz)| lr %.2e | %.2f ms | %.1f%% bf16 MFU | %.0f tok/s

A z-score is nan until its window has filled ("(+nanz)"); the MFU and tok/s columns may be missing.
Every other line (val loss, samples, notes, a rank's messages) is passed over; a "skipping update ..."
notice marks the step line that follows it as skipped. Values keep the text they were printed with, so
that what a script prints of them is what the log says.

From bash (LOG: a file; A / B: the inclusive step range; --step N, repeatable: only those steps):

    python3 dev/steplog.py lines LOG [--from A] [--to B] [--step N] [--no-timing]
        the step lines as printed; --no-timing cuts each before "| <ms> ms" (runs that must agree bit
        for bit differ in their timing columns only)
    python3 dev/steplog.py count LOG [--from A] [--to B] [--step N] [--exact]
        --exact: only lines exactly as the printf format above prints their values (every column)
    python3 dev/steplog.py losses LOG [--from A] [--to B] [--step N]
        "step loss norm ms", one line per step line
    python3 dev/steplog.py last LOG [FIELD]
        the last step line, or its FIELD (step num_steps loss loss_z norm norm_z lr ms mfu tok_per_s);
        nothing when there is none
    python3 dev/steplog.py median-ms LOG [--skip N] [--last N] [--lower]
        median of the ms column over the step lines after the first --skip / over the last --last;
        of an even count the mean of the two middle values (as awk prints it, %.6g), with --lower the
        lower one; "nan" when there are no step lines
    python3 dev/steplog.py compare A B [--from F] [--to L] [--limit X]
        max |loss A - loss B| over the steps of A in [F, L] (all of A's by default): "nan" and exit 1
        when a step is missing from B or A has none; exit 1 when above --limit
    python3 dev/steplog.py wait LOG N --pid PID [--interval S]
        polls LOG until it shows step N (exit 0) or process PID is gone (exit 1)

From Python: sys.path.insert(0, "dev"); import steplog; steplog.read(path) -> [Step],
steplog.losses_by_step(path) -> {step: loss}, steplog.parse(line) -> Step or None.
"""
from __future__ import annotations

import argparse
import os
import re
import sys
import time
from dataclasses import dataclass, field

NUM = r"[-+]?(?:nan|inf|\d+(?:\.\d*)?(?:e[-+]?\d+)?)"  # what C's %f / %e print, nan and inf included
STEP_RE = re.compile(
    rf"^step +(?P<step>\d+)/(?P<num_steps>\d+) \| loss +(?P<loss>{NUM}) \((?P<loss_z>{NUM})z\)\| "
    rf"norm +(?P<norm>{NUM}) \((?P<norm_z>{NUM})z\)\| lr +(?P<lr>{NUM}) \| +(?P<ms>{NUM}) ms"
    rf"(?: \| +(?P<mfu>{NUM})% bf16 MFU)?(?: \| +(?P<tok_per_s>{NUM}) tok/s)?")
STEP_START_RE = re.compile(r"^step +(\d+)/\d+ \|")  # the start of a step line, enough to see a step has begun
SKIP_RE = re.compile(r"^skipping update ")
FIELDS = ("step", "num_steps", "loss", "loss_z", "norm", "norm_z", "lr", "ms", "mfu", "tok_per_s")
FORMAT = "step %4d/%d | loss %7.6f (%+.2fz)| norm %6.4f (%+.2fz)| lr %.2e | %.2f ms | %.1f%% bf16 MFU | %.0f tok/s"


@dataclass
class Step:
    step: int                # 1-based, as printed
    num_steps: int
    loss: float
    loss_z: float
    norm: float
    norm_z: float
    lr: float
    ms: float
    mfu: float | None        # None where the column is missing
    tok_per_s: float | None
    line: str                # the line as printed, without its newline
    text: dict = field(default_factory=dict)  # FIELD -> the value's text as printed ("" when missing)
    skipped: bool = False    # a "skipping update ..." notice came before it


def parse(line, skipped=False):
    """The Step of one line, or None when it is not a step line."""
    line = line.rstrip("\r\n")
    m = STEP_RE.match(line)
    if not m:
        return None
    t = {k: (m.group(k) or "") for k in FIELDS}
    num = lambda k: float(t[k]) if t[k] else None  # noqa: E731
    return Step(int(t["step"]), int(t["num_steps"]), num("loss"), num("loss_z"), num("norm"), num("norm_z"),
                num("lr"), num("ms"), num("mfu"), num("tok_per_s"), line, t, skipped)


def parse_lines(lines):
    """The Steps of an iterable of lines, in order."""
    out, skip = [], False
    for line in lines:
        s = parse(line, skip)
        if s:
            out.append(s)
            skip = False
        elif SKIP_RE.match(line):
            skip = True
    return out


def read(path):
    """The Steps of a log file (bytes that are not UTF-8 spoil their line only)."""
    with open(path, errors="replace") as f:
        return parse_lines(f)


def losses_by_step(path):
    """{step: loss} of a log; a step printed twice keeps its last loss."""
    return {s.step: s.loss for s in read(path)}


def select(steps, first=None, last=None, only=None):
    return [s for s in steps if (first is None or s.step >= first) and (last is None or s.step <= last)
            and (not only or s.step in only)]


def exact(s):
    """Whether the line is what the trainer's printf format prints of its values (llm.c's format)."""
    if s.mfu is None or s.tok_per_s is None:
        return False
    return s.line == FORMAT % (s.step, s.num_steps, s.loss, s.loss_z, s.norm, s.norm_z, s.lr, s.ms, s.mfu,
                               s.tok_per_s)


def without_timing(s):
    """The step line up to its "| <ms> ms" column (the columns after it are timings too)."""
    m = STEP_RE.match(s.line)
    return s.line[:m.start("ms")].rstrip(" ")[:-1]


def median(texts, lower=False):
    """The median of numbers given as text: the middle text itself, or the mean of the two middle ones
    formatted as awk prints a number (%.6g, integers whole); "nan" of none."""
    if not texts:
        return "nan"
    v = sorted(texts, key=float)
    n = len(v)
    if n % 2 or lower:
        return v[(n - 1) // 2]
    m = (float(v[n // 2 - 1]) + float(v[n // 2])) / 2
    return str(int(m)) if m == int(m) and abs(m) < 1e16 else "%.6g" % m


def max_dloss(a, b):
    """max |a.loss - b.loss| over the steps of a (lists of Step); nan when a step of a is not in b or a
    is empty."""
    bl = {s.step: s.loss for s in b}
    if not a or any(s.step not in bl for s in a):
        return float("nan")
    return max(abs(s.loss - bl[s.step]) for s in a)


def llmc_checker_lines(lines, num_steps=10):
    """The lines llm.c's dev/loss_checker_ci.py reads from a log (a list of lines): from the first one
    that holds "step    1/N", N lines (fewer at the end of the log); None when there is no such line."""
    start = next((i for i, l in enumerate(lines) if f"step {1:4d}/{num_steps}" in l), None)
    return None if start is None else lines[start:start + num_steps]


def llmc_checker_loss(line):
    """The loss as llm.c's checker reads it: columns 20-28 of the line (ValueError when not a number)."""
    return float(line[20:28].strip())


def wait_for_step(path, n, pid, interval=0.1):
    """Polls path until a line of it starts step n (True) or process pid is gone (False)."""
    pos, tail = 0, ""
    while True:
        try:
            with open(path, errors="replace") as f:
                f.seek(pos)
                chunk = f.read()
                pos = f.tell()
        except FileNotFoundError:
            chunk = ""
        tail += chunk
        lines = tail.split("\n")
        for line in lines:  # the last one may still be being written: its start is enough
            m = STEP_START_RE.match(line)
            if m and int(m.group(1)) == n:
                return True
        tail = lines[-1]
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            pass
        time.sleep(interval)


def main(argv=None):
    ap = argparse.ArgumentParser(prog="steplog.py", description="Reads the step lines of a training log.")
    sub = ap.add_subparsers(dest="cmd", required=True)

    def ranged(p):
        p.add_argument("--from", dest="first", type=int)
        p.add_argument("--to", dest="last", type=int)
        p.add_argument("--step", dest="only", type=int, action="append")

    for name in ("lines", "count", "losses"):
        p = sub.add_parser(name)
        p.add_argument("log")
        ranged(p)
        if name == "lines":
            p.add_argument("--no-timing", action="store_true")
        if name == "count":
            p.add_argument("--exact", action="store_true")
    p = sub.add_parser("last")
    p.add_argument("log")
    p.add_argument("field", nargs="?", choices=FIELDS)
    p = sub.add_parser("median-ms")
    p.add_argument("log")
    p.add_argument("--skip", type=int, default=0)
    p.add_argument("--last", type=int)
    p.add_argument("--lower", action="store_true")
    p = sub.add_parser("compare")
    p.add_argument("a")
    p.add_argument("b")
    p.add_argument("--from", dest="first", type=int)
    p.add_argument("--to", dest="last", type=int)
    p.add_argument("--limit", type=float)
    p = sub.add_parser("wait")
    p.add_argument("log")
    p.add_argument("n", type=int)
    p.add_argument("--pid", type=int, required=True)
    p.add_argument("--interval", type=float, default=0.1)
    args = ap.parse_args(argv)

    if args.cmd == "wait":
        return 0 if wait_for_step(args.log, args.n, args.pid, args.interval) else 1
    try:
        steps = read(args.log if args.cmd != "compare" else args.a)
        other = read(args.b) if args.cmd == "compare" else None
    except OSError as e:
        print(f"steplog.py: cannot read '{e.filename}': {e.strerror}", file=sys.stderr)
        return 1
    if args.cmd in ("lines", "count", "losses"):
        steps = select(steps, args.first, args.last, args.only)
    if args.cmd == "lines":
        for s in steps:
            print(without_timing(s) if args.no_timing else s.line)
    elif args.cmd == "count":
        print(len([s for s in steps if exact(s)] if args.exact else steps))
    elif args.cmd == "losses":
        for s in steps:
            print(s.text["step"], s.text["loss"], s.text["norm"], s.text["ms"])
    elif args.cmd == "last":
        value = (steps[-1].text[args.field] if args.field else steps[-1].line) if steps else ""
        if value:
            print(value)
    elif args.cmd == "median-ms":
        steps = steps[args.skip:]
        if args.last is not None:
            steps = steps[-args.last:] if args.last > 0 else []
        print(median([s.text["ms"] for s in steps], args.lower))
    elif args.cmd == "compare":
        d = max_dloss(select(steps, args.first, args.last), other)
        print(repr(d))
        return 1 if d != d or (args.limit is not None and d > args.limit) else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
