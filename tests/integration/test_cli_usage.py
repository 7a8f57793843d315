"""The CLI's usage: the usual mistakes of a newcomer (misspelt commands and options, a program
without `--`, pasted --gpu values, --sim anywhere), each answered with a message that says what
happened and what to do instead; `--gpu all`, output formats, sizes, completions, and the README's
and man page's examples and variables."""

import json
import os
import re
import subprocess
import sys
import tempfile
import unittest

from support import BIN, PYTHON_LOADS_LIBRARIES, SOURCE, Case, base_env, for_python, gpusel, private_path, sim_env, uuids

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
                             "takes no argument", "gpusel --sim dgx-h100 resolve --gpu 0,1")
        # A `--` before the stray GPU ends nothing once the GPU joins the list.
        for args, line in ((["--gpu", "0", "--", "1"], "resolve --gpu 0,1"), (["--", "1"], "resolve --gpu 1"),
                           (["--gpu", "0", "1", "--"], "resolve --gpu 0,1")):
            with self.subTest(args=args):
                r = gpusel("--sim", "dgx-h100", "resolve", *args)
                self.assertEqual(r.returncode, 2, r.stderr)
                self.assertTrue(r.stderr.rstrip().endswith(f"gpusel --sim dgx-h100 {line}"), r.stderr)


class HelpTest(Case):
    def test_flags_with_an_optional_value_show_no_braces(self):
        for command, flag, value in (("run", "--wait", "[DURATION]"), ("resolve", "--wait", "[DURATION]"),
                                     ("list", "--watch", "[SECONDS]")):
            with self.subTest(command=command):
                r = gpusel(command, "--help")
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertNotIn(flag + "{", r.stdout)
                self.assertRegex(r.stdout, re.escape(flag) + r" " + re.escape(value))


class OptionalValueTest(Case):
    """--wait and --watch take a value or none. CLI11 drops the `--` after such an option as the end
    of its values; the parser puts it back, so a program's own options after it stay the program's."""

    def test_wait_then_dashdash_keeps_the_programs_options(self):
        for wait in (["--wait"], ["--wait", "30"], ["--wait=30"]):
            with self.subTest(wait=wait):
                r = gpusel("--sim", "dgx-h100", "run", "--quiet", "--gpu", "1", *wait, "--", "sh", "-c",
                           'echo "$1"', "sh", "-x")
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertEqual(r.stdout, "-x\n")

    def test_an_empty_value_leaves_the_next_word_alone(self):
        # `--wait="$T"` with T unset: waits as --wait alone does; the next word is not its value.
        r = gpusel("--sim", "dgx-h100", "run", "--quiet", "--gpu", "1", "--wait=", "echo", "hi")
        self.assertEqual((r.returncode, r.stdout), (0, "hi\n"), r.stderr)
        self.assertFailsWith(gpusel("--sim", "dgx-h100", "resolve", "--gpu", "1", "--wait=", "30"), 2,
                             'takes no argument "30"')
        self.assertFailsWith(gpusel("--sim", "dgx-h100", "list", "--watch=", "5"), 2, 'takes no argument "5"')

    def test_the_last_word_is_the_value_not_the_program(self):
        # As anywhere else: the word after --wait is its value, so run still needs its program; a
        # word that is no duration is refused as one, with the line that runs it instead.
        self.assertFailsWith(gpusel("--sim", "dgx-h100", "run", "--gpu", "1", "--wait", "30"), 2,
                             "COMMAND is required")
        self.assertFailsWith(gpusel("--sim", "dgx-h100", "run", "--gpu", "1", "--wait", "true"), 2,
                             '--wait "true" is not a duration',
                             "put -- before it: gpusel --sim dgx-h100 run --gpu 1 --wait -- true")

    def test_a_value_that_is_no_duration_is_refused_by_wait_itself(self):
        self.assertFailsWith(gpusel("--sim", "dgx-h100", "run", "--gpu", "1", "--wait", "soon", "--", "true"), 2,
                             '--wait "soon" is not a duration')

    def test_watch_takes_the_next_word_as_its_interval(self):
        self.assertFailsWith(gpusel("--sim", "dgx-h100", "list", "--watch", "never"), 2,
                             '--watch "never" is not a number of seconds')


class TopLevelHelpTest(Case):
    def test_options_in_their_order(self):
        r = gpusel("--help")
        self.assertEqual(r.returncode, 0, r.stderr)
        at = [r.stdout.index(o) for o in ("-h,--help", "--version", "--sim MACHINE")]
        self.assertEqual(at, sorted(at), r.stdout)


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

    def test_sim_among_the_programs_words(self):
        for tail in (["--sim", "x"], ["--sim=x"], ["--sim"]):
            with self.subTest(tail=tail):
                r = gpusel("--sim", "dgx-h100", "run", "--gpu", "0", "python3", *tail)
                self.assertFailsWith(r, 2, f'"{tail[0]}" comes after the command "python3"',
                                     "gpusel --sim dgx-h100 run --gpu 0 -- python3 " + " ".join(tail))

    def test_an_empty_sim_names_no_machine(self):
        # `--sim="$MACHINE"` with the variable unset: the word after it is not its value.
        for args in (["--sim=", "sim", "list"], ["sim", "list", "--sim="]):
            with self.subTest(args=args):
                r = gpusel(*args)
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertIn("dgx-h100", r.stdout)

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


class TableReadingTest(Case):
    """What the command line's own reader (args.cpp, over table.cpp) says where a general parser said
    "At Most 1 required", "Could not convert" or took the next option for a value."""

    def test_an_option_given_twice(self):
        self.assertFailsWith(gpusel("--sim", "dgx-h100", "resolve", "--gpu", "0", "--gpu", "1"), 2,
                             '--gpu is given twice ("0" and "1")', "one comma-separated list")
        self.assertFailsWith(gpusel("--sim", "dgx-h100", "run", "--gpu", "0", "--grace", "1", "--grace=2", "--",
                                    "true"), 2, '--grace is given twice ("1" and "2")')

    def test_a_value_left_out_is_not_taken_from_the_next_option(self):
        for tail in (["--gpu"], ["--gpu", "--json"], ["--gpu", "--"]):
            with self.subTest(tail=tail):
                self.assertFailsWith(gpusel("--sim", "dgx-h100", "resolve", *tail), 2, "--gpu needs a value (SPEC)")
        # A negative number is a value all the same: refused by the option, not as an option.
        self.assertFailsWith(gpusel("--sim", "dgx-h100", "run", "--gpu", "0", "--grace", "-1", "--", "true"), 2,
                             '--grace "-1" is not a number of seconds from 0 to 86400')

    def test_a_word_after_wait_that_is_no_duration_is_refused_with_the_line_meant(self):
        # `--wait echo hi`: echo is read as the duration, and the program meant lost its name;
        # refused before any program is looked for ("hi" not found, it used to say).
        for tail, line in ((["--wait", "echo", "hi"], "run --gpu 0 --wait -- echo hi"),
                           (["--wait", "echo"], "run --gpu 0 --wait -- echo"),
                           (["--wait", "echo", "--quiet", "hi"], "run --gpu 0 --wait --quiet -- echo hi"),
                           (["--wait", "echo", "--quiet", "--", "hi"], "run --gpu 0 --wait --quiet -- echo hi"),
                           # An option after the program it left is the program's once the name is back.
                           (["--wait", "echo", "hi", "--json"], "run --gpu 0 --wait -- echo hi --json")):
            with self.subTest(tail=tail):
                self.assertFailsWith(gpusel("--sim", "dgx-h100", "run", "--gpu", "0", *tail), 2,
                                     f'--wait "{tail[1]}" is not a duration',
                                     f"put -- before it: gpusel --sim dgx-h100 {line}")
        # What can only have been meant as a duration (a number, a word no program has, a word with `--`
        # after it) is refused as one, before the program is looked for.
        for word, rest in (("-5", ["echo", "hi"]), ("1x", ["no-such-program-anywhere"]),
                           ("no-such-program-anywhere", ["echo", "hi"]), ("echo", ["--", "no-such-program-anywhere"])):
            with self.subTest(word=word):
                r = gpusel("--sim", "dgx-h100", "run", "--gpu", "0", "--wait", word, *rest)
                self.assertFailsWith(r, 2, f'--wait "{word}" is not a duration: give seconds')
                self.assertNotIn("put -- before it", r.stderr)
        # An empty word (`--wait "$T"`, T unset) is neither a duration nor "alone" for certain.
        for args in (["run", "--gpu", "0", "--wait", "", "echo", "hi"], ["resolve", "--gpu", "free:1", "--wait", ""],
                     ["list", "--watch", ""]):
            with self.subTest(args=args):
                self.assertFailsWith(gpusel("--sim", "dgx-h100", *args), 2, "is given an empty value")
        # Durations are read as ever, and the line suggested runs as it says.
        lease_dir = private_path("wait-leases")
        for tail, printed in ((["--wait", "5", "echo", "hello"], "hello"), (["--wait", "inf", "echo", "hi"], "hi"),
                              (["--wait", "90s", "echo", "x"], "x"), (["--wait", "--", "echo", "y"], "y"),
                              (["--wait", "--", "echo", "hi", "--json"], "hi --json")):
            with self.subTest(tail=tail):
                r = gpusel("--sim", "dgx-h100", "run", "--quiet", "--gpu", "0", *tail, GPUSEL_LEASE_DIR=lease_dir)
                self.assertEqual((r.returncode, r.stdout.strip()), (0, printed), r.stderr)
        # A suggested line for another slip moves --wait alone, leaving the program its first word, and
        # keeps a number with --wait.
        self.assertFailsWith(gpusel("--sim", "dgx-h100", "run", "--gpu", "0", "1", "--wait", "echo", "hi"), 2,
                             "write: gpusel --sim dgx-h100 run --gpu 0,1 --wait -- echo hi")
        self.assertFailsWith(gpusel("--sim", "dgx-h100", "run", "--gpu", "0", "1", "--wait", "-5", "echo", "hi"), 2,
                             "write: gpusel --sim dgx-h100 run --gpu 0,1 --wait -5 -- echo hi")

    def test_a_flag_takes_true_or_false_alone(self):
        self.assertFailsWith(gpusel("list", "--json=maybe"), 2, "--json is a flag", '(not "maybe")')
        plain = gpusel("--sim", "dgx-h100", "list", "--json=false")
        self.assertEqual(plain.returncode, 0, plain.stderr)
        self.assertFalse(plain.stdout.startswith("{"), plain.stdout)
        asked = gpusel("--sim", "dgx-h100", "list", "--json=true")
        self.assertEqual(json.loads(asked.stdout)["gpus"][3]["uuid"], DGX[3])

    def test_whole_numbers_and_their_ranges(self):
        for value in ("0", "4097", "x", "1.5", "2 "):
            with self.subTest(value=value):
                self.assertFailsWith(gpusel("--sim", "dgx-h100", "run", "--gpu", "0", "--ranks-per-gpu", value, "--",
                                            "true"), 2,
                                     f'--ranks-per-gpu "{value}" is not a whole number from 1 to 4096')
        self.assertFailsWith(gpusel("--sim", "dgx-h100", "bench", "bw", "--gpu", "0", "--copies", "0"), 2,
                             '--copies "0" is not a whole number from 1 to 100000')
        self.assertFailsWith(gpusel("--sim", "dgx-h100", "resolve", "--gpu", "free:1", "--max-utilization=101"), 2,
                             '--max-utilization "101" is not a whole number from 0 to 100')

    def test_a_command_that_needs_one_of_its_own(self):
        self.assertFailsWith(gpusel(), 2, "`gpusel` needs a command: list, resolve, bind, run", "gpusel --help")
        self.assertFailsWith(gpusel("sim"), 2, "`gpusel sim` needs a command: list, env, exec, shell")
        self.assertFailsWith(gpusel("bench"), 2, "`gpusel bench` needs a command: bw")

    def test_options_that_exclude_each_other(self):
        self.assertFailsWith(gpusel("--sim", "dgx-h100", "resolve", "--gpu", "0", "--format", "csv", "--json"), 2,
                             "--json and --format cannot be given together")
        self.assertFailsWith(gpusel("sim", "env", "--undo", "dgx-h100"), 2,
                             "MACHINE and --undo cannot be given together")

    def test_gpusel_s_own_option_after_the_program_is_refused(self):
        # run's own --quiet after the program's name, without --: the program's or gpusel's? Refused,
        # with the line that says which.
        self.assertFailsWith(gpusel("--sim", "dgx-h100", "run", "--gpu", "0", "echo", "--quiet"), 2,
                             '"--quiet" comes after the command "echo"',
                             "gpusel --sim dgx-h100 run --gpu 0 -- echo --quiet")

    def test_gpusel_s_option_after_the_program_offers_both_readings(self):
        # Found by review: the line suggested for `bind echo hi --gpu 1` must not bind GPU 0.
        self.assertFailsWith(gpusel("--sim", "dgx-h100", "bind", "echo", "hi", "--gpu", "1"), 2,
                             "for `gpusel bind` to take it, write: gpusel --sim dgx-h100 bind --gpu 1 -- echo hi",
                             "to pass it to the command, put -- before the command: "
                             "gpusel --sim dgx-h100 bind -- echo hi --gpu 1")

    def test_suggested_lines_keep_the_whole_line(self):
        # Found by the second review: each suggested line must do what was typed, nothing less.
        self.assertFailsWith(gpusel("--sim", "dgx-h100", "run", "--gpu", "0", "python3", "t.py", "--wait", "30"), 2,
                             "write: gpusel --sim dgx-h100 run --gpu 0 --wait 30 -- python3 t.py")
        self.assertFailsWith(gpusel("run", "--gpu", "0", "python3", "t.py", "--sim", "dgx-h100"), 2,
                             "write: gpusel --sim dgx-h100 run --gpu 0 -- python3 t.py")
        self.assertFailsWith(gpusel("--sim", "dgx-h100", "run", "--gpu", "0", "1", "--wait", "30", "python", "t.py"),
                             2, "write: gpusel --sim dgx-h100 run --gpu 0,1 --wait 30 -- python t.py")
        self.assertFailsWith(gpusel("--sim", "dgx-h100", "bind", "--share", "--gpu", "0", "1", "--", "python", "t.py"),
                             2, "write: gpusel --sim dgx-h100 run --gpu 0,1 -- gpusel bind --share -- python t.py")
        self.assertFailsWith(gpusel("--sim", "dgx-h100", "resolve", "--format", "csv", "3"), 2,
                             "gpusel --sim dgx-h100 resolve --format csv --gpu 3")
        self.assertFailsWith(gpusel("--sim", "dgx-h100", "run", "--gpu", "0", "--"), 2,
                             "as in `gpusel --sim dgx-h100 run --gpu 0 -- python3 train.py`")

    def test_double_dash_ends_options_before_the_positionals(self):
        r = gpusel("sim", "exec", "--", "dgx-h100", "sh", "-c", "echo $GPUSEL_SIM_MACHINE_NAME:$0", "-x")
        self.assertEqual((r.returncode, r.stdout.strip().split(":")[-1]), (0, "-x"), r.stderr)
        r = gpusel("sim", "env", "--", "dgx-h100")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("export GPUSEL_NVML_LIBRARY=", r.stdout)

    def test_an_empty_value_is_refused_not_taken_as_absent(self):
        # `--lease-dir="$DIR"` with DIR unset must not set up the default store.
        for args in (["setup", "--lease-dir="], ["setup", "--lease-dir", ""],
                     ["--sim", "dgx-h100", "resolve", "--gpu", "free:1", "--min-free-memory="],
                     ["--sim", "dgx-h100", "bench", "bw", "--gpu", "0", "--csv="]):
            with self.subTest(args=args):
                self.assertFailsWith(gpusel(*args), 2, "is given an empty value")

    def test_json_as_the_last_json_says(self):
        r = gpusel("--sim", "dgx-h100", "list", "--json", "--sim")
        self.assertFailsWith(r, 2, "--sim needs a machine")
        self.assertEqual(json.loads(r.stdout)["error"]["code"], "bad-input")
        r = gpusel("--sim", "dgx-h100", "resolve", "--gpu", "99", "--json", "--json=false")
        self.assertFailsWith(r, 2, "out of range")
        self.assertEqual(r.stdout, "")
        r = gpusel("--sim", "dgx-h100", "resolve", "--gpu", "0", "--json=false", "--format", "csv")
        self.assertEqual((r.returncode, r.stdout), (0, DGX[0] + "\n"), r.stderr)

    def test_help_and_version(self):
        r = gpusel("--version")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertRegex(r.stdout, r"^\d+\.\d+\.\d+\n$")
        for path in (["run"], ["sim", "exec"], ["bench", "bw"]):
            with self.subTest(path=path):
                r = gpusel(*path, "--help")
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertIn("Usage: gpusel " + " ".join(path), r.stdout)
                self.assertIn("--sim MACHINE", r.stdout)
        self.assertIn("[--] COMMAND [ARGS...]", gpusel("run", "--help").stdout)
        self.assertIn("--size BYTES", gpusel("bench", "bw", "--help").stdout)
        self.assertIn("(default: 512MiB)", gpusel("bench", "bw", "--help").stdout)
        # No line is wider than the help's 100 columns but a word that is.
        for line in gpusel("run", "--help").stdout.splitlines():
            self.assertTrue(len(line) <= 100 or " " not in line.strip(), line)


class ForgotDoubleDashTest(Case):
    def test_program_options_without_double_dash(self):
        self.assertFailsWith(
            gpusel("--sim", "dgx-h100", "run", "--gpu", "0,1", "python3", "train.py", "--epochs", "3"), 2,
            '"--epochs" comes after the command "python3"', "put -- before the command",
            "gpusel --sim dgx-h100 run --gpu 0,1 -- python3 train.py --epochs 3")
        self.assertFailsWith(gpusel("sim", "exec", "dgx-h100", "python3", "-c", "print(1)"), 2,
                             "put -- before the command", "gpusel sim exec dgx-h100 -- python3 -c 'print(1)'")


class PastedGpuValueTest(Case):
    """--gpu values copied from nvidia-smi, PyTorch or a shell each get their own hint."""

    def refused(self, value, *pieces, command=("resolve",)):
        self.assertFailsWith(gpusel("--sim", "dgx-h100", *command, "--gpu", value), 2, *pieces)

    def test_nvidia_smi_line(self):
        line = f"GPU 0: NVIDIA H100 80GB HBM3 (UUID: {DGX[0]})"
        self.refused(line, "a line of `nvidia-smi -L`", f"--gpu {DGX[0]}", "--gpu 0)")
        self.refused(f"(UUID: {DGX[3]})", "part of a line of `nvidia-smi -L`", f"--gpu {DGX[3]}")

    def test_cuda_ordinal(self):
        self.refused("cuda:1", '"cuda:1" is a CUDA ordinal', "nvidia-smi indices or GPU UUIDs", "gpusel list")

    def test_uuid_without_its_head(self):
        bare = DGX[2][len("GPU-"):]
        self.refused(bare, "starts with GPU-", f"--gpu GPU-{bare}")

    def test_blanks_instead_of_commas(self):
        self.refused("0 1", "separated by commas, not blanks", "--gpu 0,1")
        self.refused(f"{DGX[0]} {DGX[1]}", "separated by commas, not blanks", f"--gpu {DGX[0]},{DGX[1]}")

    def test_nvidia_smi_label(self):
        self.refused("GPU 3", "give the index alone: --gpu 3")

    def test_lines_instead_of_commas(self):
        lines = gpusel("--sim", "dgx-h100", "resolve", "--gpu", "0,1").stdout
        self.refused(lines.strip(), "holds 2 lines", "--format csv", "paste -sd,")
        # A trailing newline alone is fine.
        r = gpusel("--sim", "dgx-h100", "resolve", "--gpu", "0,1\n")
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_all_elsewhere_is_explained(self):
        self.refused("all", '"all"', "gpusel resolve", command=("bind",))


class GpuAllTest(Case):
    def resolve(self, *extra, machine="dgx-h100", **env):
        r = gpusel("--sim", machine, "resolve", *extra, **env)
        self.assertEqual(r.returncode, 0, r.stderr)
        return r

    def test_all_is_every_gpu(self):
        self.assertEqual(self.resolve("--gpu", "all").stdout.split(), DGX)
        self.assertEqual(self.resolve("--gpu=ALL").stdout.split(), DGX)

    def test_all_within_a_preset(self):
        r = self.resolve("--gpu", "all", CUDA_VISIBLE_DEVICES="5,2")
        self.assertEqual(r.stdout.split(), [DGX[5], DGX[2]])
        r = self.resolve("--gpu", "all", CUDA_VISIBLE_DEVICES=f"{DGX[6]},{DGX[1]}")
        self.assertEqual(r.stdout.split(), [DGX[6], DGX[1]])
        mixed = uuids("workstation-mixed")
        r = self.resolve("--gpu", "all", machine="workstation-mixed", CUDA_VISIBLE_DEVICES="0,1")
        self.assertEqual(sorted(r.stdout.split()), sorted(mixed[1:]))  # FASTEST_FIRST: 4090, A6000

    def test_all_leaves_out_what_cannot_be_used(self):
        lost = uuids("lost-gpu")
        r = self.resolve("--gpu", "all", machine="lost-gpu")
        self.assertEqual(r.stdout.split(), [lost[0], lost[1], lost[3]])
        self.assertIn("--gpu all leaves out GPU 2", r.stderr)
        mig = uuids("mig-a100")
        r = self.resolve("--gpu", "all", machine="mig-a100")
        self.assertIn("(MIG mode)", r.stderr)
        self.assertEqual(len(r.stdout.split()), 1)
        self.assertIn(r.stdout.split()[0], mig)
        # The note is the resolution's: --json lists it too.
        r = self.resolve("--gpu", "all", "--json", machine="mig-a100")
        j = json.loads(r.stdout)
        self.assertEqual((j["notes"], j["note_codes"]), (["--gpu all leaves out GPU 0 (MIG mode)"], ["all-leaves-out"]))

    def test_all_in_run(self):
        r = gpusel("run", "--sim", "dgx-h100", "--tag-output", "--gpu", "all", "--", sys.executable, "-c",
                   "import os; print(os.environ['GPUSEL_GPU'])")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(sorted(line.split()[-1] for line in r.stdout.splitlines()), sorted(DGX))

    def test_all_with_nothing_exposed(self):
        self.assertFailsWith(gpusel("--sim", "dgx-h100", "resolve", "--gpu", "all", CUDA_VISIBLE_DEVICES=""), 2,
                             "--gpu all: no GPU", 'CUDA_VISIBLE_DEVICES=""')


class ResolveFormatTest(Case):
    def test_formats(self):
        lines = gpusel("--sim", "dgx-h100", "resolve", "--gpu", "3,0")
        self.assertEqual(lines.stdout, f"{DGX[3]}\n{DGX[0]}\n")
        same = gpusel("--sim", "dgx-h100", "resolve", "--gpu", "3,0", "--format", "lines")
        self.assertEqual(same.stdout, lines.stdout)
        csv = gpusel("--sim", "dgx-h100", "resolve", "--gpu", "3,0", "--format", "csv")
        self.assertEqual(csv.stdout, f"{DGX[3]},{DGX[0]}\n")
        env = gpusel("--sim", "dgx-h100", "resolve", "--gpu", "3,0", "--format", "env")
        self.assertEqual(env.stdout, f"GPUSEL_GPUS={DGX[3]},{DGX[0]}\n")

    def test_env_format_is_ready_for_eval_and_export(self):
        env = gpusel("--sim", "dgx-h100", "resolve", "--gpu", "3,0", "--format", "env").stdout
        script = 'eval "$1"; echo "$GPUSEL_GPUS"; export "$1"; sh -c \'echo "$GPUSEL_GPUS"\''
        r = subprocess.run(["sh", "-c", script, "sh", env.strip()], capture_output=True, text=True)
        self.assertEqual(r.stdout.split(), [f"{DGX[3]},{DGX[0]}"] * 2)

    def test_bad_format(self):
        self.assertFailsWith(gpusel("--sim", "dgx-h100", "resolve", "--gpu", "0", "--format", "yaml"), 2, "yaml")
        self.assertFailsWith(gpusel("--sim", "dgx-h100", "resolve", "--gpu", "0", "--format", "csv", "--json"), 2,
                             "--json")


class NewlineInVariablesTest(Case):
    """The worker side: GPUSEL_GPUS set from `gpusel resolve` without `| paste -sd,`."""

    def bind(self, **env):
        return gpusel("--sim", "dgx-h100", "bind", LOCAL_RANK="0", **env)

    def test_gpusel_gpus_with_lines(self):
        lines = gpusel("--sim", "dgx-h100", "resolve", "--gpu", "0,1").stdout.strip()
        self.assertFailsWith(self.bind(GPUSEL_GPUS=lines), 2, "GPUSEL_GPUS=", "holds 2 lines",
                             "--format env", "paste -sd,")

    def test_gpusel_gpu_with_lines(self):
        self.assertFailsWith(self.bind(GPUSEL_GPU=f"{DGX[0]}\n{DGX[1]}"), 2, "GPUSEL_GPU=", "holds 2 lines",
                             "names one GPU", "set GPUSEL_GPUS instead")


class SizeTest(Case):
    def bench(self, size):
        return gpusel("--sim", "dgx-h100", "bench", "bw", "--gpu", "0", "--tests", "h2d", "--copies", "1",
                      "--samples", "1", "--json", "--size", size)

    def test_common_spellings(self):
        for size, expected in [("4M", 4 << 20), ("4MiB", 4 << 20), ("4mi", 4 << 20), ("4mib", 4 << 20),
                               ("4MB", 4000000), ("4mb", 4000000), ("4096k", 4 << 20), ("0.5g", 1 << 29),
                               ("4000000", 4000000), ("4 MiB", 4 << 20)]:
            with self.subTest(size=size):
                r = self.bench(size)
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertEqual(json.loads(r.stdout)["results"][0]["bytes"], expected)

    def test_precise_messages(self):
        self.assertFailsWith(self.bench("0"), 2, '--size "0" is zero bytes', "at least 4 bytes")
        self.assertFailsWith(self.bench("1001"), 2, "is 1001 bytes, not a multiple of 4", "use 1000 or 1004")
        self.assertFailsWith(self.bench("512Q"), 2, 'unknown unit "Q"', "K, M, G")
        self.assertFailsWith(self.bench("-4M"), 2, "cannot be negative")
        self.assertFailsWith(self.bench("1.3"), 2, "not a whole number of bytes")
        self.assertFailsWith(self.bench("MiB"), 2, "should start with a number")

    def test_min_free_memory_reads_sizes_as_size_does(self):
        """One parser for sizes: --min-free-memory takes what --size takes, with the same messages."""
        for size in ("8gib", "8G", "8 GiB", "8000MB", "0.0625t"):
            with self.subTest(size=size):
                r = gpusel("--sim", "dgx-h100", "resolve", "--gpu", "free:1", "--min-free-memory", size)
                self.assertEqual(r.returncode, 0, r.stderr)
        # More free memory than any GPU here has at all: a request that can never be met, refused as
        # bad input (the size was read, not ignored), not waited for (issue 30).
        r = gpusel("--sim", "dgx-h100", "resolve", "--gpu", "free:1", "--min-free-memory", "81GiB")
        self.assertFailsWith(r, 2, "can never be met", "the largest has 80 GiB", "ask for at most 80 GiB")
        self.assertFailsWith(gpusel("--sim", "dgx-h100", "resolve", "--gpu", "free:1", "--min-free-memory", "8Q"),
                             2, '--min-free-memory "8Q": unknown unit "Q"', "K, M, G")
        self.assertFailsWith(gpusel("--sim", "dgx-h100", "resolve", "--gpu", "free:1", "--min-free-memory", "-1G"),
                             2, "cannot be negative")


class SimulatedNvmlFaultTest(Case):
    def test_no_sim_suggestion_when_simulated(self):
        for machine, fault in [("nvml-missing", "missing"), ("nvml-init-fails", "init_fails")]:
            with self.subTest(machine=machine):
                r = gpusel("--sim", machine, "list")
                self.assertFailsWith(r, 1, "NVML is unavailable", f"the simulated machine {machine} models",
                                     f'nvml = "{fault}"')
                self.assertNotIn("--sim", r.stderr)


class CompletionTest(Case):
    """The bash completion the build generates (share/completions/gpusel.bash.in with the CLI's tables),
    sourced in bash and called as bash's completion would call it."""

    SCRIPT = os.path.join(os.environ.get("GPUSEL_BUILD_DIR", os.path.join(SOURCE, "build")), "share", "completions",
                          "gpusel.bash")

    def complete(self, *words, env=None):
        """The candidates for the last word of `gpusel WORDS...` (the last word is what is typed so far)."""
        line = [BIN, *words]
        script = ('source "$0"; COMP_WORDS=("${@}"); COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 )); COMP_LINE="${*}"; '
                  'COMP_POINT=${#COMP_LINE}; _gpusel; printf "%s\\n" "${COMPREPLY[@]}"')
        r = subprocess.run(["bash", "-c", script, self.SCRIPT, *line], capture_output=True, text=True,
                           env=env or sim_env("dgx-h100"), timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        return [w for w in r.stdout.splitlines() if w]

    def test_gpus_after_gpu(self):
        got = self.complete("resolve", "--gpu", "")
        self.assertEqual(got, [str(i) for i in range(8)] + DGX + ["free:", "all"])
        self.assertEqual(self.complete("run", "--gpu", "GPU-4b"), [DGX[0]])
        # The last item of a list.
        self.assertEqual(self.complete("run", "--gpu", "0,GPU-0b"), [f"0,{DGX[1]}"])
        # On the --sim machine given on the line.
        l4 = uuids("single-l4")
        self.assertEqual(self.complete("--sim", "single-l4", "bind", "--gpu", "", env=base_env()), ["0", *l4, "free:"])
        self.assertEqual(self.complete("bind", "--sim", "single-l4", "--gpu", "", env=base_env()), ["0", *l4, "free:"])

    def test_tests_after_tests(self):
        self.assertEqual(self.complete("bench", "bw", "--tests", "h2d,d"), ["h2d,d2h", "h2d,d2d", "h2d,d2h-pageable"])
        self.assertIn("bidir", self.complete("bench", "bw", "--tests", ""))

    def test_program_after_double_dash(self):
        self.assertIn("python3", self.complete("run", "--gpu", "0", "--", "pyth"))
        self.assertIn("python3", self.complete("--sim", "dgx-h100", "--", "pyth"))
        self.assertIn("python3", self.complete("sim", "exec", "dgx-h100", "--", "pyth"))
        # After the program, its own words: no gpusel options.
        self.assertNotIn("--sim", self.complete("run", "--gpu", "0", "--", "python3", "--"))
        self.assertNotIn("--gpu", self.complete("run", "--gpu", "0", "python3", "--"))

    def test_sim_only_where_accepted(self):
        self.assertIn("--sim", self.complete("--"))
        self.assertIn("--sim", self.complete("list", "--"))
        self.assertIn("--sim", self.complete("run", "--gpu", "0", "--"))
        self.assertNotIn("--sim", self.complete("run", "--gpu", "0", "--", "prog", "--"))
        # --sim given once already: not offered again at the top.
        self.assertNotIn("--sim", self.complete("--sim", "dgx-h100", ""))

    def test_commands_and_options(self):
        self.assertEqual(self.complete("re"), ["resolve"])
        self.assertEqual(self.complete("sim", ""), ["list", "env", "exec", "shell", "--help"])
        self.assertIn("--format", self.complete("resolve", "--f"))
        self.assertEqual(self.complete("resolve", "--format", ""), ["lines", "csv", "env"])
        self.assertIn("dgx-h100", self.complete("sim", "exec", ""))
        self.assertIn("dgx-h100", self.complete("--sim", "dgx"))


class RealGpuCheckTest(Case):
    SCRIPT = os.path.join(SOURCE, "tests", "gpu", "real_gpu_check.sh")

    def test_missing_binary_fails(self):
        with tempfile.TemporaryDirectory() as d:
            r = subprocess.run([self.SCRIPT, os.path.join(d, "no-gpusel")], capture_output=True, text=True,
                               cwd=d, env=base_env(GPUSEL_BIN=None))
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("missing or not executable", r.stderr)

    def test_finds_the_binary_from_any_folder(self):
        # Given as GPUSEL_BIN, from another working directory: it runs the binary (77 without a GPU).
        with tempfile.TemporaryDirectory() as d:
            r = subprocess.run([self.SCRIPT], capture_output=True, text=True, cwd=d, env=base_env(GPUSEL_BIN=BIN),
                               timeout=600)
        self.assertIn(r.returncode, (0, 77), r.stdout + r.stderr)
        self.assertNotIn("missing or not executable", r.stderr)


class MachineFileExampleTest(Case):
    """The machine file docs/simulator.md shows is a working machine. (Every command example of the
    README and docs/ is run by integration.docs, test_docs.py.)"""

    def test_machine_file_example_is_a_working_machine(self):
        with open(os.path.join(SOURCE, "docs", "simulator.md"), encoding="utf-8") as f:
            text = f.read()
        toml = text.split("```toml\n", 1)[1].split("```", 1)[0]
        self.assertNotIn("[faults]", toml)
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "my-box.toml")
            with open(path, "w") as f:
                f.write(toml)
            listing = gpusel("--sim", path, "list", "--json")
            self.assertEqual(listing.returncode, 0, listing.stderr)
            gpus = json.loads(listing.stdout)["gpus"]
            self.assertEqual([g["name"] for g in gpus], ["NVIDIA L40S"] * 2)
            r = gpusel("--sim", path, "run", "--gpu", "all", "--", BIN, "bind")
            self.assertEqual(r.returncode, 0, r.stderr)


class ManPageTest(Case):
    def test_every_variable_the_code_reads_is_documented(self):
        pattern = re.compile(r'(?:getenv|env_value|env_string|environ\.get|environ\[|get)\(\s*"([A-Z][A-Z0-9_]+)"')
        read = set()
        for folder in ("src", "tools", "python", "sim"):
            for root, _, files in os.walk(os.path.join(SOURCE, folder)):
                for name in files:
                    if name.endswith((".cpp", ".hpp", ".py")):
                        with open(os.path.join(root, name), encoding="utf-8") as f:
                            read.update(pattern.findall(f.read()))
        self.assertIn("GPUSEL_GPUS", read)
        build = os.environ.get("GPUSEL_BUILD_DIR", os.path.join(SOURCE, "build"))
        with open(os.path.join(build, "share", "man", "gpusel.1"), encoding="utf-8") as f:
            man = f.read().replace("\\-", "-").replace("\\fB", "").replace("\\fR", "")
        self.assertEqual(sorted(v for v in read if v not in man), [])
        self.assertIn(".SH EXAMPLES", man)


if __name__ == "__main__":
    unittest.main()
