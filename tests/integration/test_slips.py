"""The usual slips get a message whose suggested command works and keeps every GPU: --gpu values
split by the shell or copied with their variable, misspelt machines and choices (did you mean),
and small wording and layout slips."""

import json
import re
import shlex
import subprocess
import time

from support import BIN, Case, base_env, gpusel, uuids

DGX = uuids("dgx-h100")


class GpuSlips(Case):
    def suggestion(self, result):
        """The command after 'write: ' in a refusal, as words (gpusel first)."""
        m = re.search(r"(?:write|run): (gpusel .*)$", result.stderr.strip())
        self.assertIsNotNone(m, result.stderr)
        return shlex.split(m.group(1))

    def run_suggestion(self, words):
        self.assertEqual(words[0], "gpusel")
        return subprocess.run([BIN, *words[1:]], capture_output=True, text=True, env=base_env(), timeout=60)

    def test_resolve_blank_between_gpus(self):
        r = gpusel("--sim", "dgx-h100", "resolve", "--gpu", "0", "1")
        self.assertFailsWith(r, 2, "commas, not blanks")
        words = self.suggestion(r)
        self.assertEqual(words, ["gpusel", "--sim", "dgx-h100", "resolve", "--gpu", "0,1"])
        fixed = self.run_suggestion(words)
        self.assertEqual(fixed.stdout.split(), DGX[0:2], fixed.stderr)  # both GPUs, none dropped

    def test_blank_after_comma(self):
        r = gpusel("--sim", "dgx-h100", "resolve", "--gpu", "0,", "1", "--format", "csv")
        words = self.suggestion(r)
        self.assertEqual(words[3:], ["resolve", "--gpu", "0,1", "--format", "csv"])

    def test_bench_blank_between_gpus(self):
        r = gpusel("--sim", "dgx-h100", "bench", "bw", "--gpu", "0", "1", "--size", "1MiB")
        self.assertFailsWith(r, 2)
        self.assertEqual(self.suggestion(r)[3:], ["bench", "bw", "--gpu", "0,1", "--size", "1MiB"])

    def test_run_blank_then_dashdash(self):
        r = gpusel("--sim", "dgx-h100", "run", "--quiet", "--gpu", "2", "3", "--", "true")
        self.assertFailsWith(r, 2)
        words = self.suggestion(r)
        self.assertEqual(words[3:], ["run", "--quiet", "--gpu", "2,3", "--", "true"])
        self.assertEqual(self.run_suggestion(words).returncode, 0)

    def test_run_blank_then_program_without_dashdash(self):
        r = gpusel("--sim", "dgx-h100", "run", "--gpu", "2", "3", "echo", "hi")
        self.assertFailsWith(r, 2)
        self.assertNotIn("not found", r.stderr)
        words = self.suggestion(r)
        self.assertEqual(words[3:], ["run", "--gpu", "2,3", "--", "echo", "hi"])
        fixed = self.run_suggestion(words)
        self.assertEqual(fixed.stdout.split("\n").count("hi"), 2, fixed.stdout + fixed.stderr)

    def test_a_value_joined_to_its_option_is_not_a_gpu(self):
        # The words are those the parser read: `--wait 5` is --wait's value, not run's program.
        r = gpusel("--sim", "dgx-h100", "run", "--wait", "5", "--gpu", "2", "3", "echo", "hi")
        self.assertFailsWith(r, 2, "commas, not blanks")
        self.assertEqual(self.suggestion(r)[3:], ["run", "--wait", "5", "--gpu", "2,3", "--", "echo", "hi"])
        r = gpusel("--sim", "dgx-h100", "resolve", "--gpu", "0", "--wait", "5", "1")
        # The stray GPU joins --gpu's list (the suggestion once dropped GPU 0 and --sim).
        self.assertFailsWith(r, 2, 'takes no argument "1"', "gpusel --sim dgx-h100 resolve --gpu 0,1 --wait 5")

    def test_a_program_named_like_a_number_is_still_a_program(self):
        # `run --gpu 0 true` is the after-command slip of its own kind, not a GPU.
        r = gpusel("--sim", "dgx-h100", "run", "--gpu", "0", "true", "--x")
        self.assertFailsWith(r, 2)
        self.assertIn("-- true --x", r.stderr)

    def test_assignment_pasted_in(self):
        r = gpusel("--sim", "dgx-h100", "run", "--gpu", "CUDA_VISIBLE_DEVICES=2,3", "--", "true")
        self.assertFailsWith(r, 2, "assignment", "CUDA_VISIBLE_DEVICES")
        words = self.suggestion(r)
        self.assertEqual(words[3:], ["run", "--gpu", "2,3", "--", "true"])
        r = gpusel("--sim", "dgx-h100", "resolve", "--gpu=GPUSEL_GPUS=1,2")
        self.assertEqual(self.suggestion(r)[3:], ["resolve", "--gpu=1,2"])

    def test_bind_takes_one(self):
        r = gpusel("--sim", "dgx-h100", "bind", "--gpu", "0", "1")
        self.assertFailsWith(r, 2, "one GPU")
        words = self.suggestion(r)
        self.assertEqual(words[3:], ["run", "--gpu", "0,1", "--", "gpusel", "bind"])

    def test_library_hint_for_an_assignment(self):
        # The C ABI and Python get the hint too (no command line to rewrite there).
        r = gpusel("--sim", "dgx-h100", "resolve", "--gpu", " CUDA_VISIBLE_DEVICES=4 ")
        self.assertFailsWith(r, 2, "--gpu 4")


    def test_options_after_the_program_and_a_double_dash(self):
        # CLI11 ends run at the `--` after the program's first words; what follows is still the program's.
        r = gpusel("--sim", "dgx-h100", "run", "--gpu", "0", "echo", "hi", "--", "--x")
        self.assertFailsWith(r, 2, '"--x" comes after the command "echo"')
        self.assertTrue(r.stderr.strip().endswith("gpusel --sim dgx-h100 run --gpu 0 -- echo hi -- --x"), r.stderr)


class DidYouMean(Case):
    def test_machine_names(self):
        for args in (["--sim", "dgx-h10", "list"], ["sim", "env", "dgx-h10"], ["sim", "exec", "dgx-h10", "--", "true"]):
            with self.subTest(args=args):
                self.assertFailsWith(gpusel(*args), 2, "did you mean 'dgx-h100'?")
        self.assertFailsWith(gpusel("--sim", "workstation-mix", "list"), 2, "did you mean 'workstation-mixed'?")
        # Nothing close: the list of machines is where to look.
        r = gpusel("--sim", "zzzzzzzz", "list")
        self.assertFailsWith(r, 2, "gpusel sim list")
        self.assertNotIn("did you mean", r.stderr)

    def test_choices(self):
        cases = [(["run", "--set-visible", "jobs", "--gpu", "0", "--", "true"], "job"),
                 (["run", "--bind-cpu", "nodes", "--gpu", "0", "--", "true"], "node"),
                 (["resolve", "--gpu", "0", "--format", "cvs"], "csv"),
                 (["bench", "bw", "--gpu", "0", "--tests", "h2d,d2hh"], "d2h")]
        for args, guess in cases:
            with self.subTest(args=args):
                self.assertFailsWith(gpusel("--sim", "dgx-h100", *args), 2, f"did you mean '{guess}'?")

    def test_commands(self):
        self.assertFailsWith(gpusel("doctr"), 2, "did you mean 'doctor'?")
        self.assertFailsWith(gpusel("sim", "lst"), 2, "did you mean 'list'?")


class SmallSlips(Case):
    def test_device_order_shown_as_assignment(self):
        r = gpusel("--sim", "dgx-h100", "list", CUDA_DEVICE_ORDER="PCI_BUS_ID")
        self.assertIn('CUDA_DEVICE_ORDER="PCI_BUS_ID"', r.stdout)
        self.assertNotIn('ORDER ="', r.stdout)

    def test_no_question_mark_then_full_stop(self):
        r = gpusel("list", GPUSEL_NVML_LIBRARY="/nonexistent/libnvidia-ml.so.1")
        self.assertEqual(r.returncode, 1)
        self.assertIn("installed? To try", r.stderr)
        self.assertNotIn("?.", r.stderr)

    def test_one_gpu_is_singular(self):
        r = gpusel("--sim", "dgx-h100", "resolve", "--gpu", "free:1", CUDA_VISIBLE_DEVICES="")
        self.assertFailsWith(r, 2, "asks for 1 GPU,")

    def test_seconds_without_six_decimals(self):
        # A job holds GPU 0 while a second one waits for it for half a second.
        r = gpusel("--sim", "dgx-h100", "run", "--quiet", "--gpu", "0", "--", BIN, "run", "--quiet", "--gpu", "0",
                   "--wait", "0.5", "--", "true")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("still waiting after 0.5 s", r.stderr)
        self.assertNotIn("0.500000", r.stderr)

    def test_lease_lines_quote_the_command(self):
        env = base_env()
        holder = subprocess.Popen([BIN, "--sim", "dgx-h100", "run", "--quiet", "--gpu", "4", "--", "sh", "-c",
                                   "sleep 30; echo done"], env=env, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL)
        try:
            for _ in range(100):
                r = gpusel("--sim", "dgx-h100", "list")
                if "leased by" in r.stdout:
                    break
                time.sleep(0.1)
            line = next(l for l in r.stdout.splitlines() if "leased by" in l)
            self.assertIn("-- sh -c 'sleep 30; echo done'`", line)
        finally:
            holder.terminate()
            holder.wait(timeout=30)

    def test_mig_rows_fit_the_name_column(self):
        r = gpusel("--sim", "mig-a100", "list")
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.splitlines()
        header = next(l for l in lines if l.startswith("INDEX"))
        memory_end = header.index("MEMORY") + len("MEMORY")
        rows = [l for l in lines if re.match(r"^(\d+ |  MIG )", l)]
        self.assertTrue(any(l.startswith("  MIG") for l in rows))
        for line in rows:
            # Every row's memory ends under the MEMORY heading ("40 GiB", "9.8 GiB").
            self.assertEqual(line[memory_end - 3:memory_end], "GiB", line)


class WordedForTheCommandLine(Case):
    """The library writes both wordings of a message where a program's and the command line's
    differ (between the control bytes 0x1d-0x1f); whatever the command shows of it is worded for its
    users: no such byte reaches stdout or stderr, on any path of these refusals and notes."""

    MARKS = re.compile(r"[\x1d\x1e\x1f]|\\u001[def]")  # the bytes, or JSON's escapes of them

    def test_no_message_shows_both_wordings(self):
        lines = "\n".join(DGX[:2])
        cases = [
            ("resolve", "--gpu", "0 1"), ("resolve", "--gpu", "cuda:1"), ("resolve", "--gpu", lines),
            ("resolve", "--gpu", "GPU 3"), ("resolve", "--gpu", "9"), ("resolve", "--gpu", "GPU-zz"),
            ("resolve", "--gpu", "CUDA_VISIBLE_DEVICES=2,3"), ("resolve", "--gpu", "1,01"),
            ("resolve", "--gpu", "0,GPU-aa"), ("resolve", "--gpu", " , "), ("resolve", "--gpu", "free:0"),
            ("resolve", "--gpu", "free:99"), ("resolve", "--gpu", "9", "--json"),
            ("resolve", "--gpu", "1,0", "--json"), ("run", "--gpu", "0 1", "--", "true"),
            ("run", "--gpu", "0", "--", ""), ("bind", "--gpu", "0,1"), ("bind", "--gpu", "9", "--json"),
            ("bench", "bw", "--gpu", "9"), ("doctor",), ("doctor", "--json"), ("list",), ("list", "--json"),
        ]
        envs = [{}, {"CUDA_VISIBLE_DEVICES": "0,1"}, {"GPUSEL_GPUS": "9"}, {"GPUSEL_GPU": "cuda:0"}]
        # Values holding the marks themselves (a value pasted with control bytes): escaped where a
        # message quotes them, dropped from raw text, never a second wording shown.
        odd = [{"GPUSEL_GPUS": "X=0\x1d1"}, {"GPUSEL_GPUS": "X=0\x1f1"}, {"CUDA_VISIBLE_DEVICES": "a\x1fb"},
               {"CUDA_VISIBLE_DEVICES": "x\x1ey"}, {"CUDA_VISIBLE_DEVICES": "99"}]
        cases_odd = [("bind",), ("bind", "--json"), ("doctor", "--json"), ("list", "--probe", "--json"),
                     ("list", "--probe")]
        for args, extra in [(a, e) for a in cases for e in envs] + [(a, e) for a in cases_odd for e in odd]:
            r = gpusel("--sim", "dgx-h100", *args, env=base_env(**extra))
            shown = r.stdout + r.stderr
            for value in extra.values():  # the value itself, echoed as data by --json, is no message
                shown = shown.replace(json.dumps(value)[1:-1], "")
            with self.subTest(args=args, env=extra):
                self.assertIsNone(self.MARKS.search(shown), shown)
        # A refusal that names the library's remedies in a program's words reads --gpu here.
        r = gpusel("--sim", "dgx-h100", "resolve", "--gpu", "0 1")
        self.assertIn("--gpu 0,1", r.stderr)
        self.assertNotIn("GPU request", r.stderr)
