"""
Plot one or more main.log files (llm.c's format) into a PNG: train/val loss, learning rate,
gradient norm and eval accuracy against the step.

    python dev/plot_log.py -o out.png runA/main.log runB/main.log

Lines understood (formats.md): "s:%d trl:%f lr:%f norm:%f", "s:%d tel:%f", "s:%d eval:%f";
older train lines without lr/norm and unknown lines are accepted. If a step appears twice (a log
appended to after a resume), the last value wins. Each file is labelled by its directory name.
"""
import argparse
import os
import sys

import matplotlib

matplotlib.use("Agg")  # no display needed
import matplotlib.pyplot as plt  # noqa: E402

SERIES = ("trl", "tel", "lr", "norm", "eval")


def parse_log(path):
    """Returns {key: {step: value}} for the keys in SERIES."""
    data = {k: {} for k in SERIES}
    with open(path) as f:
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


def plot(paths, out, logy=False):
    fig, axes = plt.subplots(2, 2, figsize=(13, 8))
    ax_loss, ax_lr, ax_norm, ax_eval = axes.flat
    for i, path in enumerate(paths):
        data = parse_log(path)
        name = label_for(path, paths)
        color = f"C{i % 10}"

        def line(ax, key, **kw):
            pts = sorted(data[key].items())
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], color=color, **kw)

        line(ax_loss, "trl", alpha=0.5, lw=0.8, label=f"{name} train")
        line(ax_loss, "tel", lw=2, marker="o", ms=3, label=f"{name} val")
        line(ax_lr, "lr", label=name)
        line(ax_norm, "norm", lw=0.8, label=name)
        line(ax_eval, "eval", marker="o", ms=3, label=name)
        if data["tel"]:
            print(f"{path}: min val loss {min(data['tel'].values()):.4f}")
        if data["eval"]:
            last = max(data["eval"])
            print(f"{path}: eval accuracy {data['eval'][last]:.4f} at step {last}")
    for ax, title in ((ax_loss, "loss"), (ax_lr, "learning rate"), (ax_norm, "grad norm"),
                      (ax_eval, "eval accuracy")):
        ax.set_title(title)
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
        if ax.has_data():
            ax.legend(fontsize=8)
    if logy:
        ax_loss.set_yscale("log")
    fig.tight_layout()
    fig.savefig(out, dpi=100)
    print(f"wrote {out}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    ap.add_argument("logs", nargs="+", help="main.log files")
    ap.add_argument("-o", "--out", default="plot.png", help="output PNG (default plot.png)")
    ap.add_argument("--logy", action="store_true", help="log scale for the loss")
    args = ap.parse_args()
    for p in args.logs:
        if not os.path.isfile(p):
            sys.exit(f"error: log file '{p}' does not exist")
    plot(args.logs, args.out, args.logy)


if __name__ == "__main__":
    main()
