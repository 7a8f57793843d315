"""`gpusel run`: one worker per GPU, the environment protocol, failures, signals, CPU binding."""

import json
import os
import signal
import subprocess
import tempfile
import time
import unittest

from support import BIN, MACHINES, Case, base_env, gpusel, sim_env, uuids

DGX = uuids("dgx-h100")
MIX = uuids("workstation-mixed")


def run(machine_name, *args, timeout=60, **env):
    return subprocess.run([BIN, "run", *args], capture_output=True, text=True, env=sim_env(machine_name, **env),
                          timeout=timeout)


def default_signals():
    """Whoever runs the tests may have started them with some signals ignored; gpusel keeps those
    ignored (as nohup asks), so the forwarding test starts it with every disposition at default."""
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT):
        signal.signal(sig, signal.SIG_DFL)


def bound(result):
    """rank -> the `gpusel bind --json` object each worker printed."""
    out = {}
    for line in result.stdout.splitlines():
        j = json.loads(line[line.index("{"):])
        out[j["rank"]] = j
    return out


class RunTest(Case):
    def test_each_rank_binds_its_gpu(self):
        r = run("dgx-h100", "--gpu", "3,1,6", "--", BIN, "bind", "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        b = bound(r)
        self.assertEqual([b[k]["uuid"] for k in range(3)], [DGX[3], DGX[1], DGX[6]])
        self.assertEqual([b[k]["cuda_ordinal"] for k in range(3)], [3, 1, 6])

    def test_readme_worker_example(self):
        example = os.environ.get("GPUSEL_WORKER_EXAMPLE", "build/bin/worker_example")
        r = run("workstation-mixed", "--tag-output", "--gpu", "2,1", "--", example)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(sorted(r.stdout.splitlines()), [
            f"[rank 0] rank 0: CUDA device 1, {MIX[2]} (NVIDIA RTX A6000), fp8 e4m3 no",
            f"[rank 1] rank 1: CUDA device 0, {MIX[1]} (NVIDIA GeForce RTX 4090), fp8 e4m3 yes",
        ])

    def test_sim_option_reaches_the_workers(self):
        r = subprocess.run([BIN, "--sim", "single-l4", "run", "--gpu", "0", "--", BIN, "bind", "--json"],
                           capture_output=True, text=True, env=base_env(), timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(bound(r)[0]["simulated"], "single-l4")

    def test_mixed_machine_under_fastest_first(self):
        r = run("workstation-mixed", "--gpu", "0,1,2", "--", BIN, "bind", "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        b = bound(r)
        self.assertEqual([b[k]["uuid"] for k in range(3)], MIX)
        self.assertEqual([b[k]["cuda_ordinal"] for k in range(3)], [2, 0, 1])
        self.assertEqual([b[k]["index"] for k in range(3)], [0, 1, 2])

    def test_under_a_preset(self):
        r = run("dgx-h100", "--gpu", "2,0", "--", BIN, "bind", "--json", CUDA_VISIBLE_DEVICES="6,4,2")
        self.assertEqual(r.returncode, 0, r.stderr)
        b = bound(r)
        self.assertEqual([b[k]["uuid"] for k in range(2)], [DGX[2], DGX[6]])
        self.assertEqual([b[k]["cuda_ordinal"] for k in range(2)], [2, 0])
        r = run("workstation-mixed", "--gpu", "1,0", "--", BIN, "bind", "--json", CUDA_VISIBLE_DEVICES="2,0")
        b = bound(r)
        self.assertEqual([b[k]["uuid"] for k in range(2)], [MIX[1], MIX[0]])

    def test_environment_protocol(self):
        script = ('echo "$RANK|$LOCAL_RANK|$WORLD_SIZE|$LOCAL_WORLD_SIZE|$MASTER_ADDR|$MASTER_PORT|$GPUSEL_GPU|'
                  '$GPUSEL_GPUS|${CUDA_VISIBLE_DEVICES-unset}"')
        r = run("dgx-h100", "--tag-output", "--gpu", "5,2", "--", "sh", "-c", script)
        self.assertEqual(r.returncode, 0, r.stderr)
        rows = sorted(l.split("] ", 1)[1].split("|") for l in r.stdout.splitlines())
        self.assertEqual(len(rows), 2)
        for rank, row in enumerate(rows):
            self.assertEqual(row[:5], [str(rank), str(rank), "2", "2", "127.0.0.1"])
            self.assertTrue(0 < int(row[5]) < 65536)
            self.assertEqual(row[6], [DGX[5], DGX[2]][rank])
            self.assertEqual(row[7], f"{DGX[5]},{DGX[2]}")
            self.assertEqual(row[8], "unset")
        self.assertEqual(rows[0][5], rows[1][5])
        r = run("dgx-h100", "--tag-output", "--gpu", "0", "--", "sh", "-c", script, MASTER_ADDR="node0.example",
                MASTER_PORT="1234", CUDA_VISIBLE_DEVICES="3,2", RANK="99")
        row = r.stdout.split("] ", 1)[1].strip().split("|")
        self.assertEqual(row[0], "0")  # gpusel's own protocol wins over a stale RANK
        self.assertEqual(row[4:6], ["node0.example", "1234"])
        self.assertEqual(row[6], DGX[3])
        self.assertEqual(row[8], "3,2")  # passed through untouched

    def test_a_failing_worker_stops_the_others(self):
        # The others would loop for ever; they end only because gpusel sends them SIGTERM.
        script = ('trap "echo stopped-$RANK; exit 0" TERM; echo up; '
                  'if [ "$RANK" = 1 ]; then sleep 0.3; exit 3; fi; while :; do sleep 0.05; done')
        r = run("dgx-h100", "--tag-output", "--gpu", "0,1,2", "--", "sh", "-c", script)
        self.assertEqual(r.returncode, 3)
        self.assertIn("[rank 0] stopped-0", r.stdout)
        self.assertIn("[rank 2] stopped-2", r.stdout)
        self.assertNotIn("stopped-1", r.stdout)
        self.assertIn(f"gpusel: rank 1 (GPU {DGX[1]}) exited with status 3; the other 2 workers were stopped",
                      r.stderr)

    def test_grace_then_sigkill(self):
        # Rank 1 notes SIGTERM and carries on; only SIGKILL, after the grace period, ends it.
        script = ('if [ "$RANK" = 0 ]; then sleep 0.3; exit 4; fi; trap "echo term-ignored" TERM; '
                  'echo up; while :; do sleep 0.05; done')
        r = run("dgx-h100", "--tag-output", "--grace", "0.5", "--gpu", "0,1", "--", "sh", "-c", script)
        self.assertEqual(r.returncode, 4, r.stderr)
        self.assertIn("[rank 1] term-ignored", r.stdout)
        self.assertIn("rank 0 (GPU", r.stderr)

    def test_ignored_signals_stay_ignored(self):
        # Like `nohup gpusel run ...`: SIGHUP ignored on entry is neither forwarded nor reset.
        def ignore_hup():
            default_signals()
            signal.signal(signal.SIGHUP, signal.SIG_IGN)
        script = 'trap "echo got-HUP" HUP; echo ready; sleep 1; echo done'
        p = subprocess.Popen([BIN, "run", "--gpu", "0", "--", "sh", "-c", script], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env=sim_env("dgx-h100"), preexec_fn=ignore_hup)
        self.assertEqual(p.stdout.readline().strip(), "ready")
        p.send_signal(signal.SIGHUP)
        out, err = p.communicate(timeout=20)
        self.assertEqual((p.returncode, out.strip()), (0, "done"), err)

    def test_status_of_a_killed_worker(self):
        r = run("dgx-h100", "--gpu", "0", "--", "sh", "-c", "kill -9 $$")
        self.assertEqual(r.returncode, 137)
        self.assertIn("was killed by signal SIGKILL (status 137)", r.stderr)

    def test_signals_are_forwarded(self):
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT):
            with self.subTest(signal=sig.name):
                name = sig.name[3:]
                script = f'trap "echo got-{name}-$RANK; exit 0" {name}; echo ready; while :; do sleep 0.05; done'
                p = subprocess.Popen([BIN, "run", "--tag-output", "--gpu", "0,1", "--", "sh", "-c", script],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     env=sim_env("dgx-h100"), preexec_fn=default_signals)
                ready = 0
                while ready < 2:
                    line = p.stdout.readline()
                    if not line:
                        self.fail("gpusel ended early: " + p.stderr.read())
                    ready += "ready" in line
                p.send_signal(sig)
                out, err = p.communicate(timeout=20)
                self.assertEqual(p.returncode, 0, err)
                self.assertIn(f"[rank 0] got-{name}-0", out)
                self.assertIn(f"[rank 1] got-{name}-1", out)

    def test_no_orphans_after_sigkill(self):
        p = subprocess.Popen([BIN, "run", "--gpu", "0,1,2", "--", "sleep", "60"], env=sim_env("dgx-h100"),
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        children = []
        deadline = time.monotonic() + 10
        while len(children) < 3 and time.monotonic() < deadline:
            try:
                with open(f"/proc/{p.pid}/task/{p.pid}/children") as f:
                    children = [int(c) for c in f.read().split()]
            except FileNotFoundError:
                pass
            time.sleep(0.05)
        self.assertEqual(len(children), 3)
        p.kill()
        p.wait()

        def alive(pid):
            try:
                with open(f"/proc/{pid}/stat") as f:
                    return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
            except FileNotFoundError:
                return False

        deadline = time.monotonic() + 5
        while any(alive(c) for c in children) and time.monotonic() < deadline:
            time.sleep(0.05)
        self.assertEqual([c for c in children if alive(c)], [])

    def test_bad_commands_fail_before_any_worker(self):
        with tempfile.TemporaryDirectory() as d:
            marker = os.path.join(d, "started")
            plain = os.path.join(d, "plain.txt")
            open(plain, "w").close()
            cases = [
                (["/nonexistent/prog"], ["does not exist", "no worker was started"]),
                (["no-such-command-gpusel"], ['command "no-such-command-gpusel" not found in PATH=']),
                ([plain], ["is not an executable file"]),
            ]
            for command, pieces in cases:
                with self.subTest(command=command):
                    r = run("dgx-h100", "--gpu", "0,1", "--", *command)
                    self.assertFailsWith(r, 2, *pieces)
            r = run("dgx-h100", "--gpu", "0,9", "--", "sh", "-c", f"touch {marker}")
            self.assertFailsWith(r, 2, '"9"', "out of range")
            self.assertFalse(os.path.exists(marker))
        self.assertFailsWith(run("dgx-h100", "--gpu", "0"), 2, "COMMAND")
        self.assertFailsWith(run("dgx-h100", "--", "true"), 2, "--gpu")
        self.assertFailsWith(run("dgx-h100", "--gpu", "0", "--bind-cpu", "socket", "--", "true"), 2, "--bind-cpu")

    def test_tag_output(self):
        r = run("dgx-h100", "--tag-output", "--gpu", "0,1", "--", "sh", "-c",
                'echo "out $RANK"; echo "err $RANK" >&2; printf "tail $RANK"')
        self.assertEqual(sorted(r.stdout.splitlines()),
                         ["[rank 0] out 0", "[rank 0] tail 0", "[rank 1] out 1", "[rank 1] tail 1"])
        self.assertEqual(sorted(r.stderr.splitlines()), ["[rank 0] err 0", "[rank 1] err 1"])

    def test_without_nvml(self):
        r = run("nvml-missing", "--gpu", "1,0", "--", BIN, "bind", "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("NVML is unavailable", r.stderr)
        b = bound(r)
        self.assertEqual([b[k]["cuda_ordinal"] for k in range(2)], [1, 0])


@unittest.skipUnless(len(os.sched_getaffinity(0)) >= 2, "needs two CPUs")
class BindCpuTest(Case):
    def machine_file(self, cpus0, cpus1):
        with open(os.path.join(MACHINES, "dgx-h100.toml")) as f:
            text = f.read()
        gpus = text.split("[[gpu]]")
        head, first, second = gpus[0], gpus[1], gpus[2]
        first = first.replace('cpus = "0-55,112-167"', f'cpus = "{cpus0}"')
        second = second.replace('cpus = "0-55,112-167"', f'cpus = "{cpus1}"')
        fd, path = tempfile.mkstemp(suffix=".toml")
        with os.fdopen(fd, "w") as f:
            f.write(head.replace('name = "dgx-h100"', 'name = "two-cpus"') + "[[gpu]]" + first + "[[gpu]]" + second)
        self.addCleanup(os.unlink, path)
        return path

    def cpus_by_rank(self, path, mode):
        r = subprocess.run([BIN, "--sim", path, "run", "--bind-cpu", mode, "--gpu", "0,1", "--", BIN, "bind", "--json"],
                           capture_output=True, text=True, env=base_env(), timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        b = bound(r)
        return [b[0]["cpus"], b[1]["cpus"]]

    def test_node_exclusive_none(self):
        c = sorted(os.sched_getaffinity(0))[:2]
        both = f"{c[0]},{c[1]}"
        self.assertEqual(self.cpus_by_rank(self.machine_file(str(c[0]), str(c[1])), "node"), [str(c[0]), str(c[1])])
        self.assertEqual(self.cpus_by_rank(self.machine_file(both, both), "exclusive"), [str(c[0]), str(c[1])])
        shared = self.cpus_by_rank(self.machine_file(both, both), "node")
        self.assertEqual(shared[0], shared[1])
        mine = subprocess.run([BIN, "--sim", "dgx-h100", "bind", "--json"], capture_output=True, text=True,
                              env=base_env()).stdout
        self.assertEqual(self.cpus_by_rank(self.machine_file(str(c[0]), str(c[1])), "none"),
                         [json.loads(mine)["cpus"]] * 2)

    def test_cpus_outside_the_allowed_set(self):
        path = self.machine_file("1000", "1001")
        r = gpusel("--sim", path, "run", "--bind-cpu", "node", "--gpu", "0,1", "--", "true")
        self.assertFailsWith(r, 1, "--bind-cpu", "(1000)", "outside this process's CPUs")


if __name__ == "__main__":
    unittest.main()
