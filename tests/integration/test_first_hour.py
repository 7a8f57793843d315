"""The first hour (issue 12): the usual mistakes of a newcomer, each fed to gpusel, each answered
with a message that says what happened and what to do instead."""

import os
import sys
import tempfile
import unittest

from support import BIN, Case, base_env, gpusel, uuids

DGX = uuids("dgx-h100")


class MisspeltTest(Case):
    def test_unknown_command_suggests_the_nearest(self):
        self.assertFailsWith(gpusel("lsit"), 2, "unknown command 'lsit'; did you mean 'list'?")
        self.assertFailsWith(gpusel("runn", "--gpu", "0", "--", "true"), 2,
                             "unknown command 'runn'; did you mean 'run'?")
        self.assertFailsWith(gpusel("resol", "--gpu", "0"), 2, "did you mean 'resolve'?")
        self.assertFailsWith(gpusel("sim", "evn", "dgx-h100"), 2, "unknown command 'evn' for `gpusel sim`",
                             "did you mean 'env'?")
        self.assertFailsWith(gpusel("bench", "bww", "--gpu", "0"), 2, "did you mean 'bw'?")

    def test_unknown_command_without_a_near_one_lists_the_commands(self):
        r = gpusel("frobnicate")
        self.assertFailsWith(r, 2, "unknown command 'frobnicate'", "list, resolve", "run")
        self.assertNotIn("did you mean", r.stderr)

    def test_unknown_option_suggests_the_nearest(self):
        self.assertFailsWith(gpusel("--sim", "dgx-h100", "resolve", "--gpus", "0,1"), 2,
                             "unknown option '--gpus' for `gpusel resolve`; did you mean --gpu?")
        self.assertFailsWith(gpusel("--sim", "dgx-h100", "run", "--gpus", "0,1", "--", "true"), 2,
                             "did you mean --gpu?")
        self.assertFailsWith(gpusel("list", "--jsn"), 2, "did you mean --json?")
        self.assertFailsWith(gpusel("--sim", "dgx-h100", "bench", "bw", "--gpu", "0", "--test", "h2d"), 2,
                             "did you mean --tests?")
        self.assertFailsWith(gpusel("--sum", "dgx-h100", "list"), 2, "did you mean --sim?")

    def test_gpus_as_an_argument(self):
        self.assertFailsWith(gpusel("--sim", "dgx-h100", "resolve", "0,1"), 2,
                             "takes no argument", "gpusel resolve --gpu 0,1")


class SimAnywhereTest(Case):
    def test_sim_after_the_command(self):
        before = gpusel("--sim", "dgx-h100", "list", "--json")
        after = gpusel("list", "--sim", "dgx-h100", "--json")
        equals = gpusel("list", "--json", "--sim=dgx-h100")
        self.assertEqual(before.returncode, 0, before.stderr)
        self.assertEqual(after.stdout, before.stdout)
        self.assertEqual(equals.stdout, before.stdout)
        r = gpusel("resolve", "--gpu", "3", "--sim", "dgx-h100")
        self.assertEqual(r.stdout.split(), [DGX[3]], r.stderr)
        r = gpusel("bench", "bw", "--sim", "dgx-h100", "--gpu", "0", "--size", "4MiB", "--copies", "1",
                   "--samples", "1", "--tests", "h2d", "--json")
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_sim_twice_or_without_a_machine(self):
        self.assertFailsWith(gpusel("--sim", "dgx-h100", "list", "--sim", "single-l4"), 2,
                             "--sim is given twice", '"dgx-h100"', '"single-l4"')
        self.assertFailsWith(gpusel("list", "--sim"), 2, "--sim needs a machine", "gpusel sim list")

    def test_sim_after_double_dash_belongs_to_the_command(self):
        r = gpusel("--sim", "dgx-h100", "run", "--gpu", "0", "--", sys.executable, "-c",
                   "import sys; print(sys.argv[1:])", "--sim", "x")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.strip(), "['--sim', 'x']")


class SimExecTest(Case):
    PROGRAM = "import os; print(os.environ['GPUSEL_SIM_MACHINE'], os.environ['GPUSEL_NVML_LIBRARY'])"

    def expected_env(self, name):
        out = gpusel("sim", "env", name).stdout
        env = {}
        for line in out.splitlines():
            if line.startswith("export "):
                key, _, value = line[len("export "):].partition("=")
                env[key] = value.strip("'")
        return env

    def check(self, *args):
        r = gpusel(*args)
        self.assertEqual(r.returncode, 0, r.stderr)
        env = self.expected_env("dgx-h100")
        self.assertEqual(r.stdout.split(), [env["GPUSEL_SIM_MACHINE"], env["GPUSEL_NVML_LIBRARY"]])

    def test_sim_exec_runs_the_command_with_sim_env(self):
        self.check("sim", "exec", "dgx-h100", "--", sys.executable, "-c", self.PROGRAM)

    def test_sim_with_double_dash(self):
        self.check("--sim", "dgx-h100", "--", sys.executable, "-c", self.PROGRAM)

    def test_exit_status_passes_through(self):
        r = gpusel("--sim", "dgx-h100", "--", sys.executable, "-c", "raise SystemExit(7)")
        self.assertEqual(r.returncode, 7)

    def test_gpusel_itself_on_the_machine(self):
        r = gpusel("sim", "exec", "single-l4", "--", BIN, "list", "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn('"simulated": "single-l4"', r.stdout)

    def test_missing_command_is_bad_input(self):
        self.assertFailsWith(gpusel("sim", "exec", "dgx-h100", "--", "no-such-program-x"), 2,
                             '"no-such-program-x" not found in PATH=', "check its spelling")
        self.assertFailsWith(gpusel("--sim", "dgx-h100", "--", "./no/such/file"), 2, "does not exist")
        with tempfile.TemporaryDirectory() as d:
            plain = os.path.join(d, "plain")
            with open(plain, "w") as f:
                f.write("echo hi\n")
            os.chmod(plain, 0o644)
            self.assertFailsWith(gpusel("--sim", "dgx-h100", "--", plain), 2, "not an executable file")
            os.chmod(plain, 0o755)
            self.assertFailsWith(gpusel("--sim", "dgx-h100", "--", plain), 2, "#! line")
        self.assertFailsWith(gpusel("--sim", "no-such-machine", "--", "true"), 2, "no-such-machine")
        self.assertFailsWith(gpusel("--sim", "dgx-h100", "--"), 2, "names no command")
        self.assertFailsWith(gpusel("--", "true"), 2, "gpusel --sim MACHINE -- COMMAND", "gpusel run --gpu")

    def test_program_without_double_dash(self):
        self.assertFailsWith(gpusel("--sim", "dgx-h100", "python3", "prog.py"), 2,
                             "unknown command 'python3'", "put -- before it",
                             "gpusel --sim dgx-h100 -- python3 prog.py")


class ForgotDoubleDashTest(Case):
    def test_program_options_without_double_dash(self):
        self.assertFailsWith(
            gpusel("--sim", "dgx-h100", "run", "--gpu", "0,1", "python3", "train.py", "--epochs", "3"), 2,
            '"--epochs" comes after the command "python3"', "put -- before the command",
            "gpusel --sim dgx-h100 run --gpu 0,1 -- python3 train.py --epochs 3")
        self.assertFailsWith(gpusel("sim", "exec", "dgx-h100", "python3", "-c", "print(1)"), 2,
                             "put -- before the command", "gpusel sim exec dgx-h100 -- python3 -c 'print(1)'")


if __name__ == "__main__":
    unittest.main()
