"""
Checks dev/steplog.py (run by dev/test/steplog_check.sh, which sets STEPLOG_TRAINER_LOG to the output of
a program printing step lines with llmc/step_line.h; without it those tests are skipped).
Usage: python3 dev/test/steplog_check.py [-v]
"""
import contextlib
import io
import math
import os
import subprocess
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import steplog  # noqa: E402

# llm.c's train_gpt2.cu prints its step line with this printf format (the same as ours, docs/formats.md)
LLMC_FORMAT = "step %4d/%d | loss %7.6f (%+.2fz)| norm %6.4f (%+.2fz)| lr %.2e | %.2f ms | %.1f%% bf16 MFU | %.0f tok/s"
NAN = float("nan")


def llmc_line(step, n, loss, lz, norm, nz, lr=6e-4, ms=123.45, mfu=41.3, tok=512000):
    return LLMC_FORMAT % (step, n, loss, lz, norm, nz, lr, ms, mfu, tok)


def cli(*args):
    """steplog.py's command line in this process: (exit code, stdout); stderr is dropped."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        rc = steplog.main(list(args))
    return rc, out.getvalue()


class Parse(unittest.TestCase):
    def test_llmc_format(self):
        line = llmc_line(42, 5000, 3.281234, -0.53, 0.7312, 1.07)
        self.assertEqual(line, "step   42/5000 | loss 3.281234 (-0.53z)| norm 0.7312 (+1.07z)| lr 6.00e-04 | "
                               "123.45 ms | 41.3% bf16 MFU | 512000 tok/s")
        s = steplog.parse(line + "\n")
        self.assertEqual((s.step, s.num_steps, s.loss, s.loss_z, s.norm, s.norm_z), (42, 5000, 3.281234, -0.53, 0.7312, 1.07))
        self.assertEqual((s.lr, s.ms, s.mfu, s.tok_per_s), (6e-4, 123.45, 41.3, 512000))
        self.assertEqual((s.text["ms"], s.text["lr"], s.text["mfu"]), ("123.45", "6.00e-04", "41.3"))
        self.assertEqual(s.line, line)
        self.assertTrue(steplog.exact(s))
        self.assertFalse(s.skipped)

    def test_nan_z_scores(self):
        s = steplog.parse(llmc_line(1, 10, 10.98765, NAN, 12.25, NAN))
        self.assertIn("(+nanz)| norm 12.2500 (+nanz)|", s.line)
        self.assertTrue(math.isnan(s.loss_z) and math.isnan(s.norm_z))
        self.assertEqual(s.text["loss_z"], "+nan")
        self.assertEqual(s.loss, 10.98765)
        self.assertTrue(steplog.exact(s))
        # glibc prints a NaN with its sign bit set as -nan; a NaN loss is padded to the field width
        s = steplog.parse("step    3/10 | loss     nan (-nanz)| norm    nan (-nanz)| lr 6.00e-04 | 99.00 ms | 1.0% bf16 MFU | 9 tok/s")
        self.assertTrue(math.isnan(s.loss) and math.isnan(s.loss_z) and math.isnan(s.norm))
        self.assertEqual(s.text["loss"], "nan")

    def test_wide_numbers_and_missing_columns(self):
        s = steplog.parse(llmc_line(12345, 20000, 2.5, 3.25, 0.5, -4.0, lr=1.5e-5, ms=1234567.89, mfu=100.0, tok=1e7))
        self.assertEqual((s.step, s.num_steps, s.ms, s.tok_per_s), (12345, 20000, 1234567.89, 1e7))
        s = steplog.parse("step    2/20 | loss 4.000000 (+0.00z)| norm 1.0000 (+0.00z)| lr 6.00e-04 | 10.00 ms")
        self.assertEqual((s.step, s.ms, s.mfu, s.tok_per_s), (2, 10.0, None, None))
        self.assertFalse(steplog.exact(s))

    def test_not_step_lines(self):
        for line in ("step by step", "stepping", "step 5: the loss / stop vote", "val loss 3.250000",
                     "stopping after step 12: SIGINT/SIGTERM", "step   45/60 | lo", " step    1/10 | loss 1.0",
                     "skipping update due to loss z-score of 3.500000", "resume: loaded step 3", "",
                     "step    1/10 | loss abc (+0.00z)| norm 1.0000 (+0.00z)| lr 6.00e-04 | 10.00 ms"):
            self.assertIsNone(steplog.parse(line), line)

    def test_skip_notice(self):
        lines = [llmc_line(1, 3, 5.0, NAN, 1.0, NAN), "skipping update due to grad z-score of 4.250000",
                 llmc_line(2, 3, 9.0, 5.1, 8.0, 4.25), "val loss 4.5", llmc_line(3, 3, 4.9, 0.1, 1.0, 0.2)]
        steps = steplog.parse_lines(lines)
        self.assertEqual([s.step for s in steps], [1, 2, 3])
        self.assertEqual([s.skipped for s in steps], [False, True, False])

    def test_llmc_checker_columns(self):
        # llm.c's CI reads the loss from columns 20-28 of the 10 lines from "step    1/10" on
        lines = ["| some header |\n"] + [llmc_line(s, 10, 5.25 - 0.5 * s, NAN, 1.5, NAN) + "\n" for s in range(1, 11)]
        block = steplog.llmc_checker_lines(lines)
        self.assertEqual([steplog.llmc_checker_loss(l) for l in block], [5.25 - 0.5 * s for s in range(1, 11)])
        self.assertIsNone(steplog.llmc_checker_lines(lines[:1]))
        self.assertEqual(len(steplog.llmc_checker_lines(lines[:5])), 4)
        with self.assertRaises(ValueError):
            steplog.llmc_checker_loss("val loss 3.0 -- not a step line at all")


class TrainerOutput(unittest.TestCase):
    """The lines llmc/step_line.h prints, through steplog_check.sh's program."""
    N = 12

    def setUp(self):
        self.log = os.environ.get("STEPLOG_TRAINER_LOG")
        if not self.log:
            self.skipTest("STEPLOG_TRAINER_LOG not set (run dev/test/steplog_check.sh)")

    def test_every_step_read(self):
        steps = steplog.read(self.log)
        self.assertEqual([s.step for s in steps], list(range(1, self.N + 1)))
        for s in steps:
            z = NAN if s.step < 4 else 0.75 * (s.step % 3 - 1)
            self.assertEqual((s.num_steps, s.loss, s.norm, s.ms, s.mfu, s.tok_per_s),
                             (self.N, 5.0 - 0.25 * s.step, 1.0 + 0.125 * s.step, 100.0 + s.step, 40.5, 500000))
            self.assertTrue(math.isnan(s.loss_z) if math.isnan(z) else s.loss_z == z)
            self.assertEqual(s.text["loss_z"], "+nan" if s.step < 4 else "%+.2f" % z)
            self.assertEqual(s.skipped, s.step == 7)
            self.assertTrue(steplog.exact(s), s.line)
        self.assertEqual(steplog.losses_by_step(self.log), {s: 5.0 - 0.25 * s for s in range(1, self.N + 1)})

    def test_cli(self):
        self.assertEqual(cli("count", self.log), (0, "12\n"))
        self.assertEqual(cli("count", self.log, "--exact", "--from", "3", "--to", "5"), (0, "3\n"))
        self.assertEqual(cli("count", self.log, "--step", "5"), (0, "1\n"))
        self.assertEqual(cli("lines", self.log, "--step", "1", "--step", "12")[1],
                         "step    1/12 | loss 4.750000 (+nanz)| norm 1.1250 (+nanz)| lr 6.00e-04 | 101.00 ms | "
                         "40.5% bf16 MFU | 500000 tok/s\n"
                         "step   12/12 | loss 2.000000 (-0.75z)| norm 2.5000 (-0.75z)| lr 6.00e-04 | 112.00 ms | "
                         "40.5% bf16 MFU | 500000 tok/s\n")
        rc, out = cli("lines", self.log, "--from", "11", "--no-timing")
        self.assertEqual(out, "step   11/12 | loss 2.250000 (+0.75z)| norm 2.3750 (+0.75z)| lr 6.00e-04 \n"
                              "step   12/12 | loss 2.000000 (-0.75z)| norm 2.5000 (-0.75z)| lr 6.00e-04 \n")
        self.assertEqual(cli("losses", self.log, "--to", "2")[1], "1 4.750000 1.1250 101.00\n2 4.500000 1.2500 102.00\n")
        self.assertEqual(cli("last", self.log, "step")[1], "12\n")
        self.assertEqual(cli("last", self.log, "mfu")[1], "40.5\n")
        self.assertTrue(cli("last", self.log)[1].startswith("step   12/12 | loss 2.000000"))
        # medians of 101..112 ms: after 6 warm-up steps 107..112 (mean of 109 and 110); the last 10 with --lower
        self.assertEqual(cli("median-ms", self.log, "--skip", "6")[1], "109.5\n")
        self.assertEqual(cli("median-ms", self.log, "--skip", "7")[1], "110.00\n")
        self.assertEqual(cli("median-ms", self.log, "--last", "10", "--lower")[1], "107.00\n")
        self.assertEqual(cli("median-ms", self.log, "--skip", "12")[1], "nan\n")
        self.assertEqual(cli("compare", self.log, self.log, "--limit", "0"), (0, "0.0\n"))


class Files(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.addCleanup(self.dir.cleanup)

    def write(self, name, lines):
        path = os.path.join(self.dir.name, name)
        with open(path, "w") as f:
            f.write("".join(line + "\n" for line in lines))
        return path

    def test_empty_log(self):
        p = self.write("empty.log", ["no step lines here", "step by step"])
        self.assertEqual(cli("count", p), (0, "0\n"))
        self.assertEqual(cli("last", p), (0, ""))
        self.assertEqual(cli("median-ms", p), (0, "nan\n"))
        self.assertEqual(cli("compare", p, p)[0], 1)
        rc, _ = cli("count", os.path.join(self.dir.name, "missing.log"))
        self.assertEqual(rc, 1)

    def test_compare(self):
        a = self.write("a.log", [llmc_line(s, 4, 4.0 - s * 0.5, 0.0, 1.0, 0.0) for s in range(1, 5)])
        b = self.write("b.log", [llmc_line(s, 4, 4.0 - s * 0.5 + (0.25 if s == 3 else 0), 0.0, 1.0, 0.0) for s in range(1, 5)])
        c = self.write("c.log", [llmc_line(s, 4, 4.0 - s * 0.5, 0.0, 1.0, 0.0) for s in range(3, 5)])
        self.assertEqual(cli("compare", a, b), (0, "0.25\n"))
        self.assertEqual(cli("compare", a, b, "--limit", "0.01"), (1, "0.25\n"))
        self.assertEqual(cli("compare", a, b, "--to", "2", "--limit", "0.01"), (0, "0.0\n"))
        self.assertEqual(cli("compare", a, c), (1, "nan\n"))  # steps 1-2 missing from c
        self.assertEqual(cli("compare", c, a), (0, "0.0\n"))

    def test_wait(self):
        p = os.path.join(self.dir.name, "growing.log")
        sleeper = subprocess.Popen(["sleep", "30"])
        self.addCleanup(lambda: (sleeper.kill(), sleeper.wait()))

        def grow():
            with open(p, "w") as f:
                for s in range(1, 6):
                    time.sleep(0.05)
                    f.write("note\n" + llmc_line(s, 5, 3.0, 0.0, 1.0, 0.0)[:20])  # half a line first
                    f.flush()
                    time.sleep(0.02)
                    f.write(llmc_line(s, 5, 3.0, 0.0, 1.0, 0.0)[20:] + "\n")
                    f.flush()
        t = threading.Thread(target=grow)
        t.start()
        self.assertTrue(steplog.wait_for_step(p, 4, sleeper.pid, 0.01))
        t.join()
        with open(p) as f:
            self.assertEqual(len(steplog.parse_lines(f)), 5)
        gone = subprocess.Popen(["true"])
        gone.wait()  # reaped: its pid names no process
        self.assertEqual(cli("wait", p, "9", "--pid", str(gone.pid), "--interval", "0.01"), (1, ""))
        self.assertEqual(cli("wait", p, "5", "--pid", str(gone.pid)), (0, ""))


if __name__ == "__main__":
    unittest.main()
