"""`gpusel bind -- PROGRAM`: the GPU chosen and claimed as `gpusel bind` chooses it, then PROGRAM in
gpusel's place (same pid) with CUDA_VISIBLE_DEVICES set to that GPU's UUID; and bare `gpusel bind`
in a script saying that it binds nothing beyond itself (issue 29, "a shell wrapper binds nothing").

Where a program runs is judged by the simulated NVML's process lists (which GPU its CUDA context is
really on), never by gpusel's report. The program, cuda_hold (tests/integration/cuda_hold.c), knows
nothing of gpusel: it takes CUDA device 0, as most programs do, and holds its context until the
test lets it go (support.Holding). The MPI case of the issue (`mpirun -np 2 ./job.sh`) is in
test_launchers_run.py; the same cases with a program built by nvcc are in
test_launchers_nvcc.py.
"""

import json
import os
import subprocess
import tempfile
import unittest

from support import BIN, CUDA_HOLD, Case, Holding, contexts, private_path, shell_script, sim_env, uuids

DGX = uuids("dgx-h100")
BIN_DIR = os.path.dirname(os.path.abspath(BIN))
HOLD = os.path.abspath(CUDA_HOLD)
# `gpusel bind --json`'s keys before `bind -- PROGRAM` came: scripts read them, none may go.
JSON_KEYS = {"rank", "rank_variable", "source", "ignored", "uuid", "nvidia_smi_index", "index", "cuda_ordinal",
             "shared", "shared_with_pid", "claim_note", "name", "total_bytes", "compute_capability", "pci_bus_id",
             "cuda_driver_version", "cpus", "simulated",
             "memory_total_bytes",  # added: the field's one name (gpu_fields.def), beside total_bytes
             "claim_code"}  # added: claim_note's code, to decide from


def env(**extra):
    """The simulated dgx-h100, with gpusel on PATH (scripts call it by name)."""
    e = sim_env("dgx-h100", **extra)
    e["PATH"] = BIN_DIR + os.pathsep + e.get("PATH", "/usr/bin:/bin")
    return e


def run(cmd, e):
    return subprocess.run(cmd, capture_output=True, text=True, env=e, timeout=60, stdin=subprocess.DEVNULL)


class ExecTest(Case):
    def assertRunsOn(self, cmd, e, index):
        """cmd (a `gpusel bind ... -- cuda_hold {DIR}`) leaves one program, gpusel's own process,
        with its only context on nvidia-smi GPU `index`, told CUDA_VISIBLE_DEVICES=<its UUID>; its
        stdout is the program's alone. Returns (stdout, stderr)."""
        with Holding(cmd, e) as h:
            ready = h.ready
            seen = contexts(e)
            rc, out, err = h.finish()
        self.assertEqual(rc, 0, err)
        self.assertEqual(list(ready), [h.proc.pid], f"the program is not gpusel's process (exec): {ready} {err}")
        pid = h.proc.pid
        self.assertEqual(seen.get(pid), [index], f"contexts by pid: {seen}")
        self.assertEqual(ready[pid], DGX[index])
        self.assertEqual(out, f"cuda_hold {pid} done\n")
        return out, err

    def test_program_runs_on_the_gpu_given(self):
        _, err = self.assertRunsOn([BIN, "bind", "--gpu", "5", "--", HOLD, "{DIR}"], env(), 5)
        self.assertIn(f"this process: nvidia-smi index 5 = {DGX[5]}", err)
        self.assertIn("running", err)

    def test_program_runs_on_the_rank_s_gpu(self):
        e = env(GPUSEL_GPUS=f"{DGX[2]},{DGX[6]}", LOCAL_RANK="1", LOCAL_WORLD_SIZE="2")
        _, err = self.assertRunsOn([BIN, "bind", "--", HOLD, "{DIR}"], e, 6)
        self.assertIn("rank 1 (LOCAL_RANK=1)", err)
        # An index within a preset CUDA_VISIBLE_DEVICES, as bind reads it.
        self.assertRunsOn([BIN, "bind", "--gpu", "1", "--", HOLD, "{DIR}"], env(CUDA_VISIBLE_DEVICES="4,7"), 7)

    def test_no_context_is_left_by_gpusel(self):
        # A program that makes no context: nothing of bind's may stay on any GPU under its pid.
        with Holding([BIN, "bind", "--gpu", "3", "--", "sh", "-c",
                      'echo "$$ $CUDA_VISIBLE_DEVICES" > {DIR}/.r && mv {DIR}/.r {DIR}/ready.$$ && '
                      'exec flock -s {DIR}/go true'], env()) as h:
            ready = h.ready
            seen = contexts(env())
            rc, _, err = h.finish()
        self.assertEqual(rc, 0, err)
        self.assertEqual(ready, {h.proc.pid: DGX[3]})
        self.assertNotIn(h.proc.pid, seen)

    def test_refusals_exit_codes_and_messages_are_bind_s(self):
        marker = private_path("started")
        cases = [dict(GPUSEL_GPUS=f"{DGX[2]},{DGX[6]}", LOCAL_RANK="0", LOCAL_WORLD_SIZE="4"),
                 dict(GPUSEL_GPU="free:1"),
                 dict(GPUSEL_GPUS=f"{DGX[2]},{DGX[6]}"),  # several listed and visible, no rank
                 dict(GPUSEL_SHARE="yes")]
        for extra in cases:
            bare = run([BIN, "bind"], env(**extra))
            r = run([BIN, "bind", "--", "touch", marker], env(**extra))
            self.assertFailsWith(r, bare.returncode)
            self.assertEqual(bare.returncode, 2, bare.stderr)
            self.assertEqual(r.stderr, bare.stderr, extra)
            self.assertEqual(r.stdout, "")
            self.assertFalse(os.path.exists(marker), f"the program ran after a refusal: {extra}")
        r = run([BIN, "bind", "--gpu", "9", "--", "touch", marker], env())
        self.assertFailsWith(r, 2, "9")
        self.assertFalse(os.path.exists(marker))

    def test_exit_status_and_arguments_are_the_program_s(self):
        r = run([BIN, "bind", "--quiet", "--gpu", "2", "--", "sh", "-c", 'printf "%s|" "$@"; exit 7', "sh", "a b",
                 "--gpu", "-x"], env())
        self.assertEqual((r.returncode, r.stdout, r.stderr), (7, "a b|--gpu|-x|", ""))

    def test_quiet_and_json(self):
        cmd = ["sh", "-c", 'echo "$CUDA_VISIBLE_DEVICES ${GPUSEL_GPU-unset} ${GPUSEL_GPUS-unset}"']
        e = env(GPUSEL_GPUS=f"{DGX[1]},{DGX[4]}", LOCAL_RANK="1", LOCAL_WORLD_SIZE="2")
        r = run([BIN, "bind", "--quiet", "--", *cmd], e)
        self.assertEqual((r.returncode, r.stdout, r.stderr), (0, f"{DGX[4]} unset unset\n", ""))
        r = run([BIN, "bind", "--", *cmd], e)
        self.assertEqual((r.returncode, r.stdout), (0, f"{DGX[4]} unset unset\n"), r.stderr)
        self.assertEqual(len(r.stderr.splitlines()), 1, r.stderr)
        self.assertRegex(r.stderr, rf"^gpusel: \[simulated\] rank 1 \(LOCAL_RANK=1\): nvidia-smi index 4 = {DGX[4]}")
        # stdout is the program's: no JSON report beside it; --quiet alone would say nothing at all.
        marker = private_path("started")
        self.assertFailsWith(run([BIN, "bind", "--json", "--", "touch", marker], e), 2, "--json")
        self.assertFalse(os.path.exists(marker))
        self.assertFailsWith(run([BIN, "bind", "--quiet"], e), 2, "--quiet", "-- PROGRAM")

    def test_a_gpusel_program_binds_the_same_gpu(self):
        # The program's own bind sees one GPU, the one bind chose: its CUDA device 0.
        e = env(GPUSEL_GPUS=f"{DGX[1]},{DGX[4]}", LOCAL_RANK="1", LOCAL_WORLD_SIZE="2")
        r = run([BIN, "bind", "--quiet", "--", BIN, "bind", "--json"], e)
        self.assertEqual(r.returncode, 0, r.stderr)
        j = json.loads(r.stdout)
        self.assertEqual((j["uuid"], j["cuda_ordinal"], j["index"]), (DGX[4], 0, 4))

    def test_missing_program(self):
        e = env()
        r = run([BIN, "bind", "--gpu", "0", "--", "no-such-program-here"], e)
        self.assertFailsWith(r, 2, "bind: command \"no-such-program-here\" not found", f'PATH="{e["PATH"]}"')
        r = run([BIN, "bind", "--gpu", "0", "--", "./no/such/file"], e)
        self.assertFailsWith(r, 2, "\"./no/such/file\" does not exist")
        # A GPU written without --gpu.
        r = run([BIN, "bind", "3"], e)
        self.assertFailsWith(r, 2, "gpusel bind --gpu 3")

    def test_claim_is_held_while_the_program_runs(self):
        """The claim's descriptor passes through the exec (no FD_CLOEXEC): a second bind of the GPU
        is refused while the program runs on it."""
        e = env()
        with Holding([BIN, "bind", "--gpu", "3", "--", HOLD, "{DIR}"], e) as h:
            self.assertEqual(len(h.ready), 1, h.proc.poll())
            second = run([BIN, "bind"], env(GPUSEL_GPU=DGX[3]))
            other = run([BIN, "bind", "--gpu", "3", "--", "true"], e)
            rc, _, err = h.finish()
        self.assertEqual(rc, 0, err)
        self.assertFailsWith(second, 2, "already bound by pid " + str(h.proc.pid))
        self.assertFailsWith(other, 2, "already bound by pid " + str(h.proc.pid))


class BareBindTest(Case):
    NOTE = "`gpusel bind` bound only its own process"

    def test_in_a_script_it_says_what_to_run_instead(self):
        for shell in (["sh"], ["bash"], ["bash", "-e"]):
            r = run([*shell, shell_script("gpusel bind --gpu 1\n")], env())
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn(f"CUDA ordinal 1 = {DGX[1]}", r.stdout)
            self.assertIn(self.NOTE, r.stderr)
            self.assertIn("exec gpusel bind -- PROGRAM", r.stderr)
        r = run(["bash", "-c", "gpusel bind --gpu 1; true"], env())
        self.assertIn(self.NOTE, r.stderr)
        r = run([shell_script("gpusel bind --gpu 1\n")], env())  # run by its #! line
        self.assertIn(self.NOTE, r.stderr)

    def test_json_stays_parseable(self):
        r = run(["sh", shell_script("gpusel bind --json --gpu 2\n")], env())
        self.assertEqual(r.returncode, 0, r.stderr)
        j = json.loads(r.stdout)
        self.assertEqual(set(j), JSON_KEYS)
        self.assertEqual(j["uuid"], DGX[2])
        self.assertIn(self.NOTE, r.stderr)

    def test_alone_it_is_a_report(self):
        # Not from a shell script (here: a test, as a launcher or gpusel run starts it): no note.
        r = run([BIN, "bind", "--json", "--gpu", "2"], env())
        self.assertEqual((r.returncode, r.stderr), (0, ""))
        self.assertEqual(set(json.loads(r.stdout)), JSON_KEYS)
        r = run([BIN, "run", "--quiet", "--gpu", "2", "--", "gpusel", "bind"], env())
        self.assertEqual((r.returncode, r.stderr), (0, ""))

    def test_a_bind_without_a_claim_says_so_by_code(self):
        # A full claim: no note, no code. A lease folder that cannot be used (a plain file): the
        # bind goes on without a claim, and says so in words and by the code "unclaimed".
        j = json.loads(run([BIN, "bind", "--json", "--gpu", "2"], env()).stdout)
        self.assertEqual((j["claim_note"], j["claim_code"]), (None, None))
        with tempfile.NamedTemporaryFile() as not_a_folder:
            r = run([BIN, "bind", "--json", "--gpu", "2"], env(GPUSEL_LEASE_DIR=not_a_folder.name))
        self.assertEqual(r.returncode, 0, r.stderr)
        j = json.loads(r.stdout)
        self.assertEqual(j["claim_code"], "unclaimed")
        self.assertIn("no claim was taken", j["claim_note"])
        self.assertIn("without a claim", r.stderr)


if __name__ == "__main__":
    unittest.main()
