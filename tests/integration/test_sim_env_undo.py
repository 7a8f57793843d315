"""Leaving a simulated machine: `eval "$(gpusel sim env --undo)"` puts the shell's environment back
exactly as it was before `eval "$(gpusel sim env MACHINE)"`, in a real bash (and dash when there is
one): LD_LIBRARY_PATH unset, set, set to empty, values with spaces, quotes, `$(...)` and line breaks,
`sim env` twice; PATH (the simulator's bin/ first, where its nvidia-smi is, and back exactly as it
was); and `--undo` with nothing to undo is exit 2 with nothing on stdout."""

import os
import shutil
import subprocess
import tempfile
import unittest

from support import BIN, SIM_ROOT, Case, base_env, gpusel

# The shell's own variable that changes between two commands.
SHELL_OWN = {"_"}

# Runs in the shell under test: $1 the gpusel executable, $2 the snapshots' folder, then the
# machines to put the shell on, in order. Snapshots: before, on (after the last sim env), after.
SCRIPT = r"""
g=$1; d=$2; shift 2
env -0 > "$d/before"
for m in "$@"; do
  code=$("$g" sim env "$m") || exit 3
  eval "$code"
done
env -0 > "$d/on"
code=$("$g" sim env --undo) || exit 4
eval "$code"
env -0 > "$d/after"
"""

WEIRD = "/a b/it's \"quoted\"/$(touch /nonexistent/x)`id`\n/line two:%20 100% done\t\\x"


def shells():
    found = ["bash"]
    if shutil.which("dash"):
        found.append("dash")
    return found


def snapshot(path):
    with open(path, "rb") as f:
        entries = [e for e in f.read().split(b"\0") if e]
    out = {}
    for e in entries:
        key, _, value = e.partition(b"=")
        out[key.decode()] = value.decode("utf-8", "surrogateescape")
    return {k: v for k, v in out.items() if k not in SHELL_OWN}


def sim_dir(sub=""):
    return os.path.join(os.path.abspath(SIM_ROOT), sub) if sub else os.path.abspath(SIM_ROOT)


class UndoTest(Case):
    maxDiff = None

    def round_trip(self, machines, shell="bash", **variables):
        """Runs SCRIPT with base_env() plus `variables` (None: unset); the three snapshots."""
        env = base_env(**variables)
        env.pop("GPUSEL_SIM_SAVED", None)
        d = self.enterContext(tempfile.TemporaryDirectory())
        r = subprocess.run([shell, "-c", SCRIPT, shell, os.path.abspath(BIN), d, *machines], env=env,
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, f"{shell}: exit {r.returncode}: {r.stderr}")
        return snapshot(os.path.join(d, "before")), snapshot(os.path.join(d, "on")), snapshot(
            os.path.join(d, "after"))

    def check(self, machines=("dgx-h100",), **variables):
        for shell in shells():
            with self.subTest(shell=shell):
                before, on, after = self.round_trip(machines, shell, **variables)
                self.assertTrue(on["LD_LIBRARY_PATH"].startswith(sim_dir()), on["LD_LIBRARY_PATH"])
                self.assertEqual(on["PATH"].split(":")[0], sim_dir("bin"))
                self.assertEqual(on["PATH"].split(":").count(sim_dir("bin")), 1, on["PATH"])
                self.assertIn("GPUSEL_SIM_MACHINE", on)
                self.assertEqual(after, before)
                self.assertNotIn(sim_dir(), after.get("LD_LIBRARY_PATH", ""))
                self.assertEqual(after["PATH"], before["PATH"])
        return before, on, after

    def test_library_path_unset(self):
        before, _, after = self.check(LD_LIBRARY_PATH=None)
        self.assertNotIn("LD_LIBRARY_PATH", after)

    def test_library_path_set(self):
        _, on, after = self.check(LD_LIBRARY_PATH="/opt/x/lib:/usr/lib/y")
        self.assertEqual(on["LD_LIBRARY_PATH"], sim_dir() + ":/opt/x/lib:/usr/lib/y")
        self.assertEqual(after["LD_LIBRARY_PATH"], "/opt/x/lib:/usr/lib/y")

    def test_library_path_empty(self):
        _, _, after = self.check(LD_LIBRARY_PATH="")
        self.assertEqual(after["LD_LIBRARY_PATH"], "")

    def test_values_with_spaces_quotes_and_line_breaks(self):
        _, on, after = self.check(LD_LIBRARY_PATH=WEIRD, GPUSEL_NVML_LIBRARY="/x y/'lib'nvidia-ml.so.1",
                                  GPUSEL_CUDA_LIBRARY="", GPUSEL_SIM_MACHINE="a\nb")
        self.assertEqual(on["LD_LIBRARY_PATH"], sim_dir() + ":" + WEIRD)
        self.assertEqual(after["LD_LIBRARY_PATH"], WEIRD)
        self.assertEqual(after["GPUSEL_CUDA_LIBRARY"], "")
        self.assertEqual(after["GPUSEL_SIM_MACHINE"], "a\nb")

    def test_sim_env_twice_then_undo_once(self):
        # The second machine replaces the first: its folder alone on the path, and one undo
        # returns to before the first.
        for machines in (("dgx-h100", "cuda-missing"), ("dgx-h100", "dgx-h100"), ("cuda-missing", "single-l4")):
            with self.subTest(machines=machines):
                _, on, after = self.check(machines, LD_LIBRARY_PATH="/opt/x/lib")
                last = "no-cuda" if machines[-1] == "cuda-missing" else ""
                self.assertEqual(on["LD_LIBRARY_PATH"], sim_dir(last) + ":/opt/x/lib")
                self.assertTrue(on["GPUSEL_SIM_MACHINE"].endswith("/" + machines[-1] + ".toml"))
                self.assertEqual(after["LD_LIBRARY_PATH"], "/opt/x/lib")

    def test_sim_exec_from_a_shell_on_a_machine(self):
        # The first machine's folder does not stay on the path under another one.
        on = {}
        for line in gpusel("sim", "env", "dgx-h100", LD_LIBRARY_PATH="/opt/x/lib").stdout.splitlines():
            if line.startswith("export "):
                key, _, value = line[len("export "):].partition("=")
                on[key] = value.strip("'")
        r = gpusel("--sim", "cuda-missing", "--", "sh", "-c", 'printf %s "$LD_LIBRARY_PATH"', **on)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout, sim_dir("no-cuda") + ":/opt/x/lib")

    def test_path(self):
        # The simulator's bin/ first, the rest as it was; back exactly, odd entries included (an
        # empty entry, the current folder, kept; a space, a quote, `$(...)`, a line break).
        for path in ("/usr/local/bin:/usr/bin:/bin", "/usr/bin:/bin:", ":/usr/bin:/bin",
                     WEIRD + ":/usr/bin:/bin", "/usr/bin::/bin"):
            with self.subTest(path=path):
                before, on, after = self.check(PATH=path)
                self.assertEqual(before["PATH"], path)
                self.assertEqual(on["PATH"], sim_dir("bin") + ":" + path)
                self.assertEqual(after["PATH"], path)
        # Twice (another machine): bin/ once, still first; one undo.
        _, on, after = self.check(("dgx-h100", "mig-a100", "cuda-missing"), PATH="/usr/bin:/bin")
        self.assertEqual(on["PATH"], sim_dir("bin") + ":/usr/bin:/bin")
        self.assertEqual(after["PATH"], "/usr/bin:/bin")

    def test_path_changed_on_the_machine(self):
        # A folder the shell put on PATH while on a machine stays when it moves to another machine
        # (sim env builds on PATH as it is, without its own bin/), and --undo returns PATH to before
        # the first sim env, as for every variable it set.
        script = r"""
g=$1
eval "$("$g" sim env dgx-h100)"
PATH=/opt/mine/bin:$PATH
eval "$("$g" sim env single-l4)"
printf '%s\n' "$PATH"
eval "$("$g" sim env --undo)"
printf '%s\n' "$PATH"
"""
        for shell in shells():
            with self.subTest(shell=shell):
                env = base_env(PATH="/usr/bin:/bin")
                env.pop("GPUSEL_SIM_SAVED", None)
                r = subprocess.run([shell, "-c", script, shell, os.path.abspath(BIN)], env=env,
                                   capture_output=True, text=True, timeout=60)
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertEqual(r.stdout.splitlines(),
                                 [sim_dir("bin") + ":/opt/mine/bin:/usr/bin:/bin", "/usr/bin:/bin"])

    def test_sim_exec_path(self):
        # sim exec / --sim: bin/ first on the program's PATH, and its nvidia-smi is the one found.
        r = gpusel("--sim", "dgx-h100", "--", "sh", "-c", 'printf "%s\\n" "$PATH"; command -v nvidia-smi',
                   PATH="/usr/bin:/bin")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.splitlines(),
                         [sim_dir("bin") + ":/usr/bin:/bin", os.path.join(sim_dir("bin"), "nvidia-smi")])

    def test_undo_with_nothing_to_undo(self):
        r = gpusel("sim", "env", "--undo", GPUSEL_SIM_SAVED=None)
        self.assertFailsWith(r, 2, "no simulated machine to leave", "GPUSEL_SIM_SAVED is not set",
                             'gpusel sim env MACHINE', "nothing to undo")
        self.assertEqual(r.stdout, "")
        # Put on one by hand: how to leave it.
        r = gpusel("sim", "env", "--undo", GPUSEL_SIM_SAVED=None, GPUSEL_SIM_MACHINE="/m/dgx-h100.toml")
        self.assertFailsWith(r, 2, 'GPUSEL_SIM_MACHINE="/m/dgx-h100.toml"', "open a new shell",
                             "unset GPUSEL_SIM_MACHINE GPUSEL_NVML_LIBRARY GPUSEL_CUDA_LIBRARY")
        self.assertEqual(r.stdout, "")
        # And eval of it changes nothing.
        env = base_env(LD_LIBRARY_PATH="/opt/x/lib")
        env.pop("GPUSEL_SIM_SAVED", None)
        r = subprocess.run(["bash", "-c", 'env -0; eval "$("$1" sim env --undo 2>/dev/null)"; echo; env -0; :', "bash",
                            os.path.abspath(BIN)], env=env, capture_output=True, timeout=60)
        self.assertEqual(r.returncode, 0)
        before, _, after = r.stdout.partition(b"\n")
        strip = lambda s: sorted(e for e in s.split(b"\0") if e and not e.startswith(b"_="))
        self.assertEqual(strip(after), strip(before))

    def test_a_changed_saved_value_is_bad_input(self):
        for value in ("", "LD_LIBRARY_PATH=%4", "LD_LIBRARY_PATH=%zz", "1X=a", "A A", "A= ",
                      "LD_LIBRARY_PATH=%00"):
            with self.subTest(value=value):
                r = gpusel("sim", "env", "--undo", GPUSEL_SIM_SAVED=value)
                self.assertFailsWith(r, 2, "GPUSEL_SIM_SAVED=", "open a new shell")
                self.assertEqual(r.stdout, "")

    def test_undo_takes_no_machine_and_env_needs_one(self):
        r = gpusel("sim", "env", "--undo", "dgx-h100")
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertEqual(r.stdout, "")
        self.assertFailsWith(gpusel("sim", "env"), 2, "no machine given", "--undo")

    def test_undo_output_is_what_eval_reads(self):
        env = base_env(LD_LIBRARY_PATH=None)
        on = {}
        for line in gpusel("sim", "env", "single-l4", env=env).stdout.splitlines():
            if line.startswith("export "):
                key, _, value = line[len("export "):].partition("=")
                on[key] = value.strip("'")
        r = gpusel("sim", "env", "--undo", env={**env, **on})
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.splitlines()
        self.assertTrue(lines[0].startswith("# gpusel: leave the simulated machine single-l4"), lines[0])
        self.assertIn("unset LD_LIBRARY_PATH", lines)
        self.assertEqual(lines[-1], "unset GPUSEL_SIM_SAVED")


if __name__ == "__main__":
    unittest.main()
