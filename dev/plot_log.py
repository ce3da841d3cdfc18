"""
Plot one or more main.log files (llm.c's format) into a PNG: train/val loss, learning rate,
gradient norm and eval accuracy against the step.

    python dev/plot_log.py -o out.png runA/main.log runB/main.log [--logy] [--describe]

Lines understood (docs/formats.md "main.log"): "s:%d trl:%f lr:%f norm:%f", "s:%d tel:%f",
"s:%d eval:%f"; older train lines without lr/norm and unknown lines are accepted. If a step appears
twice (a log appended to after a resume), the last value wins. Each file is labelled by its directory
name. Only the panels with data in at least one log are drawn (1 to 4: a val-only log gives one loss
panel, a run without -h 1 no eval panel); a log with none of these lines is an error.
"""
import argparse
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")  # no display needed
import matplotlib.pyplot as plt  # noqa: E402

SERIES = ("trl", "tel", "lr", "norm", "eval")


def parse_log(path):
    """Returns {key: {step: value}} for the keys in SERIES."""
    data = {k: {} for k in SERIES}
    with open(path, errors="replace") as f:  # a stray non-UTF-8 byte spoils one line, not the plot
        for lineno, line in enumerate(f, 1):
            fields = dict(kv.split(":", 1) for kv in line.split() if ":" in kv)
            if "s" not in fields:
                continue
            try:
                step = int(fields["s"])
                for k in SERIES:
                    if k in fields:
                        data[k][step] = float(fields[k])
            except ValueError:
                print(f"{path}:{lineno}: skipping malformed line: {line.rstrip()}", file=sys.stderr)
    return data


def label_for(path, all_paths):
    d = os.path.basename(os.path.dirname(os.path.abspath(path))) or path
    labels = [os.path.basename(os.path.dirname(os.path.abspath(p))) for p in all_paths]
    return path if labels.count(d) > 1 else d


# panels in drawing order: (title, the series it shows)
PANELS = (("loss", ("trl", "tel")), ("learning rate", ("lr",)), ("grad norm", ("norm",)),
          ("eval accuracy", ("eval",)))
# rows x columns for 1..4 panels
GRID = {1: (1, 1), 2: (1, 2), 3: (1, 3), 4: (2, 2)}  # 3 in a row: no empty corner


def plot(paths, out, logy=False):
    """Draws the panels that have data in at least one log; returns the figure's summary (describe())."""
    runs = [(path, label_for(path, paths), parse_log(path)) for path in paths]
    panels = [(title, keys) for title, keys in PANELS if any(data[k] for _, _, data in runs for k in keys)]
    if not panels:
        sys.exit(f"error: no train, val or eval lines (s:<step> trl: / tel: / eval:) in {', '.join(paths)}")
    rows, cols = GRID[len(panels)]
    fig, axes = plt.subplots(rows, cols, figsize=(6.5 * cols if cols < 3 else 16.5, 4 * rows + 0.5), squeeze=False)
    ax_of = {title: ax for (title, _), ax in zip(panels, axes.flat)}
    for i, (path, name, data) in enumerate(runs):
        color = f"C{i % 10}"

        def line(title, key, **kw):
            pts = sorted(data[key].items())
            if pts and title in ax_of:
                ax_of[title].plot([p[0] for p in pts], [p[1] for p in pts], color=color, **kw)

        line("loss", "trl", alpha=0.5, lw=0.8, label=f"{name} train")
        line("loss", "tel", lw=2, marker="o", ms=3, label=f"{name} val")
        line("learning rate", "lr", label=name)
        line("grad norm", "norm", lw=0.8, label=name)
        line("eval accuracy", "eval", marker="o", ms=3, label=name)
        if data["tel"]:
            print(f"{path}: min val loss {min(data['tel'].values()):.4f}")
        if data["eval"]:
            last = max(data["eval"])
            print(f"{path}: eval accuracy {data['eval'][last]:.4f} at step {last}")
    for title, ax in ax_of.items():
        ax.set_title(title)
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    if logy and "loss" in ax_of:
        ax_of["loss"].set_yscale("log")
    fig.tight_layout()
    fig.savefig(out, dpi=100)
    summary = describe(fig)
    print(f"wrote {out}: {len(summary)} panel{'s' if len(summary) > 1 else ''} "
          f"({', '.join(p['title'] for p in summary)})")
    return summary


def describe(fig):
    """What the figure holds: one entry per axes, with its title and the labels of its lines."""
    return [{"title": ax.get_title(), "lines": [ln.get_label() for ln in ax.get_lines()]} for ax in fig.axes]


def main():
    ap = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    ap.add_argument("logs", nargs="+", help="main.log files")
    ap.add_argument("-o", "--out", default="plot.png", help="output PNG (default plot.png)")
    ap.add_argument("--logy", action="store_true", help="log scale for the loss")
    ap.add_argument("--describe", action="store_true",
                    help="also print the drawn panels as one JSON line: [{title, lines: [labels]}, ...]")
    args = ap.parse_args()
    for p in args.logs:
        if not os.path.isfile(p):
            sys.exit(f"error: log file '{p}' does not exist")
    summary = plot(args.logs, args.out, args.logy)
    if args.describe:
        print(json.dumps(summary))


if __name__ == "__main__":
    main()
