"""`gpusel run`: one worker per GPU, the environment protocol, failures, signals, CPU binding."""

import json
import os
import re
import select
import shutil
import signal
import subprocess
import tempfile
import time
import unittest

from support import BIN, INSTRUMENTED, MACHINES, SOURCE, Case, base_env, gpusel, sim_env, uuids

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
                # Cancelled, though every worker exited 0: `gpusel run ... && next` must not go on.
                self.assertEqual(p.returncode, 128 + sig, err)
                self.assertIn(f"[rank 0] got-{name}-0", out)
                self.assertIn(f"[rank 1] got-{name}-1", out)
                self.assertIn(f"gpusel: stopped by {sig.name}", err)
                self.assertNotIn("gpusel: rank", err)

    def test_a_forwarded_signal_escalates_to_sigkill(self):
        # Both workers note SIGTERM and carry on; only SIGKILL, after --grace, ends them.
        script = 'trap "echo term-ignored-$RANK" TERM; echo ready; while :; do sleep 0.05; done'
        p = subprocess.Popen([BIN, "run", "--tag-output", "--grace", "0.5", "--gpu", "0,1", "--", "sh", "-c", script],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=sim_env("dgx-h100"),
                             preexec_fn=default_signals)
        ready = 0
        while ready < 2:
            line = p.stdout.readline()
            if not line:
                self.fail("gpusel ended early: " + p.stderr.read())
            ready += "ready" in line
        p.send_signal(signal.SIGTERM)
        try:
            out, err = p.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()
            p.communicate()
            self.fail("workers that ignore the forwarded SIGTERM were never killed")
        self.assertEqual(p.returncode, 128 + signal.SIGTERM, err)
        self.assertIn("[rank 0] term-ignored-0", out)
        self.assertIn("[rank 1] term-ignored-1", out)
        self.assertIn("gpusel: stopped by SIGTERM", err)
        self.assertIn("SIGKILL", err)

    def test_a_signal_wins_over_a_failure(self):
        # The workers exit 5 on SIGTERM; the run was still cancelled by the user.
        script = 'trap "exit 5" TERM; echo ready; while :; do sleep 0.05; done'
        p = subprocess.Popen([BIN, "run", "--gpu", "0", "--", "sh", "-c", script], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env=sim_env("dgx-h100"), preexec_fn=default_signals)
        self.assertEqual(p.stdout.readline().strip(), "ready")
        p.send_signal(signal.SIGTERM)
        out, err = p.communicate(timeout=20)
        self.assertEqual(p.returncode, 128 + signal.SIGTERM, err)
        self.assertIn("gpusel: stopped by SIGTERM", err)
        self.assertNotIn("gpusel: rank", err)

    def test_bad_grace(self):
        for value in ("nan", "NaN", "inf", "-inf", "-1", "1e400", "ten"):
            with self.subTest(value=value):
                self.assertFailsWith(run("dgx-h100", "--grace", value, "--gpu", "0", "--", "true"), 2, "--grace",
                                     value)
        self.assertEqual(run("dgx-h100", "--grace", "0", "--gpu", "0", "--", "true").returncode, 0)

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
            except (FileNotFoundError, ProcessLookupError):  # gone, or reaped between open and read
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
        r = run("dgx-h100", "--quiet", "--tag-output", "--gpu", "0,1", "--", "sh", "-c",
                'echo "out $RANK"; echo "err $RANK" >&2; printf "tail $RANK"')
        self.assertEqual(sorted(r.stdout.splitlines()),
                         ["[rank 0] out 0", "[rank 0] tail 0", "[rank 1] out 1", "[rank 1] tail 1"])
        self.assertEqual(sorted(r.stderr.splitlines()), ["[rank 0] err 0", "[rank 1] err 1"])

    def test_a_line_per_rank_at_start(self):
        r = run("dgx-h100", "--gpu", "5,2", "--", "sh", "-c", 'echo "$RANK $$"')
        self.assertEqual(r.returncode, 0, r.stderr)
        pids = dict(line.split() for line in r.stdout.splitlines())
        for rank, gpu in ((0, 5), (1, 2)):
            self.assertIn(f"gpusel: note: rank {rank}: pid {pids[str(rank)]}, GPU {gpu} ({DGX[gpu]})", r.stderr)
        r = run("dgx-h100", "--quiet", "--gpu", "5,2", "--", "true")
        self.assertEqual(r.stderr, "")

    def test_tag_output_partial_lines(self):
        # A progress bar without a newline shows while the worker still runs, tagged and on a line
        # of its own; the worker ends only once the test has seen it.
        with tempfile.TemporaryDirectory() as d:
            go = os.path.join(d, "go")
            script = f'printf "\\rstep 1/2"; while [ ! -e {go} ]; do sleep 0.05; done; printf "\\rstep 2/2\\n"'
            p = subprocess.Popen([BIN, "run", "--tag-output", "--gpu", "0", "--", "sh", "-c", script],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=sim_env("dgx-h100"))
            first = b""
            try:
                # The first line, read without blocking for ever: gpusel that holds it until the
                # worker ends would never print it.
                while b"\n" not in first:
                    ready, _, _ = select.select([p.stdout], [], [], 20)
                    chunk = os.read(p.stdout.fileno(), 4096) if ready else b""
                    if not chunk:
                        break
                    first += chunk
            finally:
                open(go, "w").close()
            out, err = p.communicate(timeout=20)
            self.assertEqual(p.returncode, 0, err)
            self.assertEqual(first + out, b"[rank 0] \rstep 1/2\n[rank 0] \rstep 2/2\n")
            self.assertEqual(first, b"[rank 0] \rstep 1/2\n")

    def test_tag_output_long_lines(self):
        # 1 MiB without a newline from each of two workers at once: flushed in tagged pieces of at
        # most 64 KiB, each piece one worker's, nothing lost.
        size = 1 << 20
        script = f'head -c {size} /dev/zero | tr "\\0" "$RANK"; echo; echo "end $RANK" >&2'
        r = subprocess.run([BIN, "run", "--quiet", "--tag-output", "--gpu", "0,1", "--", "sh", "-c", script],
                           capture_output=True, env=sim_env("dgx-h100"), timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        got = {0: 0, 1: 0}
        for line in r.stdout.split(b"\n")[:-1]:
            self.assertRegex(line, rb"^\[rank [01]\] ")
            rank = line[6] - ord("0")
            body = line[9:]
            self.assertLessEqual(len(body), 64 * 1024)
            self.assertEqual(body, str(rank).encode() * len(body))
            got[rank] += len(body)
        self.assertEqual(got, {0: size, 1: size})
        self.assertEqual(sorted(r.stderr.splitlines()), [b"[rank 0] end 0", b"[rank 1] end 1"])

    def test_workers_get_only_the_descriptors_they_are_given(self):
        # No descriptor of gpusel's own (/dev/null, the signalfd, pipes) leaks into a worker; one the
        # caller passes on stays; and each worker holds the job's leases (one locked lease file per
        # GPU of the job), so that they outlive a SIGKILLed gpusel while any process of the job runs.
        listing = ("import os, json; print(json.dumps({f: os.readlink('/proc/self/fd/' + f) for f in "
                   "os.listdir('/proc/self/fd') if os.path.exists('/proc/self/fd/' + f)}))")
        keep_r, keep_w = os.pipe()
        self.addCleanup(os.close, keep_r)
        self.addCleanup(os.close, keep_w)
        store = os.path.realpath(sim_env("dgx-h100")["GPUSEL_LEASE_DIR"])
        leases = sorted(os.path.join(store, DGX[i] + ".lock") for i in (0, 1))
        for tag in ([], ["--tag-output"]):
            with self.subTest(tag=tag):
                r = subprocess.run([BIN, "run", *tag, "--gpu", "0,1", "--", "python3", "-c", listing],
                                   capture_output=True, text=True, env=sim_env("dgx-h100"), timeout=60,
                                   pass_fds=(keep_w,))
                self.assertEqual(r.returncode, 0, r.stderr)
                # Untagged, the two workers' lines may run together: pick the objects out.
                rows = [json.loads(m) for m in re.findall(r"\{[^{}]*\}", r.stdout)]
                self.assertEqual(len(rows), 2, r.stdout)
                for fds in rows:
                    held = sorted(t for t in fds.values() if t.endswith(".lock"))
                    others = sorted(int(f) for f, t in fds.items() if not t.endswith(".lock"))
                    self.assertEqual(others, sorted([0, 1, 2, keep_w]), fds)
                    self.assertEqual(held, leases, fds)

    @unittest.skipIf(INSTRUMENTED, "LeakSanitizer stops under ptrace")
    def test_a_worker_start_resets_only_the_handlers_set(self):
        # A worker shares gpusel's memory until its exec, so the signal handlers set in gpusel are
        # reset in it first: the parent reads which from /proc/self/status (SigCgt) instead of the
        # child asking each of the 64 signals (2 us a call on a virtual machine, every worker).
        probe = subprocess.run(["strace", "-f", "-o", os.devnull, "true"], capture_output=True)
        if probe.returncode != 0:
            self.skipTest("strace cannot trace here: " + probe.stderr.decode()[-200:])
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "run.strace")
            r = subprocess.run(["strace", "-f", "-e", "trace=rt_sigaction,execve,clone,clone3,vfork,openat",
                                "-o", out, BIN, "run", "--quiet", "--gpu", "0,1", "--", "true"],
                               capture_output=True, text=True, env=sim_env("dgx-h100"), timeout=60)
            self.assertEqual(r.returncode, 0, r.stderr)
            with open(out) as f:
                lines = f.read().splitlines()
        gpusel = lines[0].split()[0]
        workers = {line.split()[0] for line in lines
                   if line.split()[0] != gpusel and 'execve("' in line and "true" in line}
        self.assertEqual(len(workers), 2, "\n".join(lines))
        for w in workers:
            own = [line for line in lines if line.split()[0] == w]
            before_exec = own[:next(i for i, line in enumerate(own) if "execve(" in line)]
            asked = [line for line in before_exec if "rt_sigaction(" in line]
            self.assertLess(len(asked), 8, "\n".join(before_exec))

    @unittest.skipIf(INSTRUMENTED, "the sanitizers' runtimes stop without /proc")
    def test_without_proc_a_child_it_had_before_is_not_the_job_s(self):
        # gpusel run takes "no child left" from the kernel as the job's end only when /proc told it
        # that it had no child before the workers; without /proc (a sandbox, a chroot) a child from
        # the shell that exec'd it would be waited for as if it were the job's (a review found the
        # lease then held for as long as that child lived).
        with tempfile.TemporaryDirectory() as d:
            script = (f'umount -l /proc || exit 99; sleep 10 >/dev/null 2>&1 & echo $! > {d}/foreign; '
                      'exec "$0" run --quiet --gpu 5 -- true')
            r = subprocess.run(["unshare", "-m", "sh", "-c", script, BIN], capture_output=True, text=True,
                               env=sim_env("dgx-h100"), timeout=60)
            if not os.path.exists(f"{d}/foreign"):
                self.skipTest(f"no private mount namespace without /proc here: {r.stderr[-200:]}")
            with open(f"{d}/foreign") as f:
                foreign = int(f.read())
            try:
                with open(f"/proc/{foreign}/stat") as f:
                    alive = f.read().rsplit(")", 1)[1].split()[0] != "Z"
            except FileNotFoundError:
                alive = False
            try:
                os.kill(foreign, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(alive, "gpusel run waited for a child that was not the job's")

    def test_children_not_its_own_are_left_alone(self):
        # gpusel reaps its workers by pid: a child it inherited (here from the shell that execs it)
        # stays a zombie for its real owner instead of vanishing in a waitpid(-1).
        def state(pid):
            try:
                with open(f"/proc/{pid}/stat") as f:
                    return f.read().rsplit(")", 1)[1].split()[0]
            except (FileNotFoundError, ProcessLookupError):  # gone, or reaped between open and read
                return None

        def wait_for(what, deadline=20):
            end = time.monotonic() + deadline
            while not what():
                if time.monotonic() > end or p.poll() is not None:
                    self.fail("gave up waiting")
                time.sleep(0.02)

        with tempfile.TemporaryDirectory() as d:
            worker = (f'echo $$ > {d}/pid-$RANK; while [ ! -e {d}/go-$RANK ]; do sleep 0.02; done')
            # The foreign child outlives the shell's exec (a `true` could end first and be reaped by
            # the shell itself before it execs gpusel, on a loaded machine).
            p = subprocess.Popen(["sh", "-c", f'sleep 1 & echo $! > {d}/foreign; exec "$0" run --gpu 0,1 -- sh -c "$1"',
                                  BIN, worker], env=sim_env("dgx-h100"), stdout=subprocess.DEVNULL,
                                 stderr=subprocess.PIPE)
            self.addCleanup(lambda: p.poll() is None and p.kill())

            def read(name):
                try:
                    with open(os.path.join(d, name)) as f:
                        return int(f.read())
                except (FileNotFoundError, ValueError):
                    return None

            wait_for(lambda: read("foreign") and read("pid-0") and read("pid-1"))
            foreign = read("foreign")
            wait_for(lambda: state(foreign) in ("Z", None))
            self.assertEqual(state(foreign), "Z")
            rank0 = read("pid-0")
            open(os.path.join(d, "go-0"), "w").close()
            wait_for(lambda: state(rank0) is None)  # gpusel reaped rank 0
            self.assertEqual(state(foreign), "Z")
            open(os.path.join(d, "go-1"), "w").close()
            _, err = p.communicate(timeout=20)
            self.assertEqual(p.returncode, 0, err)

    def test_a_failing_poll_kills_the_workers(self):
        # poll() made to fail (an LD_PRELOAD shim): gpusel must not walk away from running workers
        # reporting success. A poll interrupted by a signal (EINTR) is simply retried.
        if shutil.which("cc") is None or "GPUSEL_TEST_PRELOAD" in os.environ:
            self.skipTest("needs a C compiler for the poll shim, and a build without sanitizers")
        with tempfile.TemporaryDirectory() as d:
            shim = os.path.join(d, "poll_shim.so")
            with open(os.path.join(d, "poll_shim.c"), "w") as f:
                f.write(POLL_SHIM)
            subprocess.run(["cc", "-shared", "-fPIC", "-o", shim, os.path.join(d, "poll_shim.c"), "-ldl"], check=True)
            r = run("dgx-h100", "--gpu", "0,1", "--", "sleep", "60", LD_PRELOAD=shim, POLL_SHIM="fail")
            self.assertFailsWith(r, 1, "poll: ", "the workers were killed")
            r = run("dgx-h100", "--tag-output", "--gpu", "0,1", "--", "sh", "-c", 'echo "hi $RANK"', LD_PRELOAD=shim,
                    POLL_SHIM="eintr")
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(sorted(r.stdout.splitlines()), ["[rank 0] hi 0", "[rank 1] hi 1"])

    def test_without_nvml(self):
        r = run("nvml-missing", "--gpu", "1,0", "--", BIN, "bind", "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("NVML is unavailable", r.stderr)
        b = bound(r)
        self.assertEqual([b[k]["cuda_ordinal"] for k in range(2)], [1, 0])


POLL_SHIM = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
int poll(struct pollfd* fds, nfds_t n, int timeout) {
  static int calls;
  int (*real)(struct pollfd*, nfds_t, int) = (int (*)(struct pollfd*, nfds_t, int))dlsym(RTLD_NEXT, "poll");
  const char* mode = getenv("POLL_SHIM");
  if (mode && strcmp(mode, "fail") == 0) { errno = ENOMEM; return -1; }
  if (mode && strcmp(mode, "eintr") == 0 && calls++ % 2 == 0) { errno = EINTR; return -1; }
  return real(fds, n, timeout);
}
"""

# A program that uses launch_workers as a library, with a child of its own.
LIBRARY_HOST = r"""
#include <dirent.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <exception>
#include <string>

#include "gpusel/launch.hpp"

static int highest_fd() {
  int top = -1;
  DIR* d = opendir("/proc/self/fd");
  int own = dirfd(d);
  while (dirent* e = readdir(d)) {
    int fd = std::atoi(e->d_name);
    if (e->d_name[0] != '.' && fd != own && fd > top) top = fd;
  }
  closedir(d);
  return top;
}

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  sigset_t before, after;
  sigprocmask(SIG_SETMASK, nullptr, &before);
  const int fds_before = highest_fd();
  const pid_t own = fork();  // the host's own child, which the host reaps
  if (own == 0) _exit(7);
  siginfo_t info{};
  waitid(P_PID, static_cast<id_t>(own), &info, WEXITED | WNOWAIT);  // it has ended, not reaped

  gpusel::LaunchOptions options;
  options.command = {"sh", "-c", "exit 0"};
  options.gpus = {"a", "b", "c"};
  options.tag_output = true;
  rlimit old_limit{};
  getrlimit(RLIMIT_NOFILE, &old_limit);
  if (mode == "emfile") {
    // Room for the signalfd, /dev/null and the first worker's pipes; the second worker's fail.
    rlimit low = old_limit;
    low.rlim_cur = static_cast<rlim_t>(fds_before + 8);
    setrlimit(RLIMIT_NOFILE, &low);
  }
  int rc = -1;
  try {
    rc = gpusel::launch_workers(options);
  } catch (const std::exception& e) {
    std::printf("threw: %s\n", e.what());
  }
  setrlimit(RLIMIT_NOFILE, &old_limit);
  sigprocmask(SIG_SETMASK, nullptr, &after);
  bool same_mask = true;
  for (int s = 1; s < NSIG; ++s) same_mask = same_mask && sigismember(&before, s) == sigismember(&after, s);
  std::printf("rc %d\n", rc);
  std::printf("mask %s\n", same_mask ? "restored" : "changed");
  std::printf("fds %s\n", highest_fd() == fds_before ? "closed" : "leaked");
  int status = 0;
  const pid_t got = waitpid(own, &status, 0);
  std::printf("own child %s\n", got == own && WIFEXITED(status) && WEXITSTATUS(status) == 7 ? "reaped by its owner" : "stolen");
  std::printf("workers %s\n", waitpid(-1, &status, WNOHANG) < 0 && errno == ECHILD ? "all reaped" : "left behind");
  return 0;
}
"""


class LibraryTest(Case):
    """launch_workers inside a host program: it leaves the host as it found it."""

    def setUp(self):
        build = os.environ.get("GPUSEL_BUILD_DIR", "build")
        library = os.path.join(build, "lib", "libgpusel.a")
        compiler = shutil.which("c++")
        if compiler is None or not os.path.exists(library) or "GPUSEL_TEST_PRELOAD" in os.environ:
            self.skipTest("needs c++ and the static library of a build without sanitizers")
        d = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, d)
        source = os.path.join(d, "host.cpp")
        with open(source, "w") as f:
            f.write(LIBRARY_HOST)
        self.host = os.path.join(d, "host")
        subprocess.run([compiler, "-std=c++20", "-I", os.path.join(SOURCE, "include"), source, library, "-ldl",
                        "-pthread", "-o", self.host], check=True)

    def host_run(self, mode):
        r = subprocess.run([self.host, mode], capture_output=True, text=True, env=base_env(), timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        return r.stdout

    def test_a_run_leaves_the_hosts_children_alone(self):
        out = self.host_run("plain")
        self.assertIn("rc 0\n", out)
        self.assertIn("own child reaped by its owner\n", out)
        self.assertIn("workers all reaped\n", out)
        self.assertIn("mask restored\n", out)
        self.assertIn("fds closed\n", out)

    def test_an_error_after_setup_undoes_it(self):
        out = self.host_run("emfile")
        self.assertIn("threw: ", out)
        self.assertIn("mask restored\n", out)
        self.assertIn("fds closed\n", out)
        self.assertIn("workers all reaped\n", out)
        self.assertIn("own child reaped by its owner\n", out)


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


@unittest.skipIf(os.path.exists("/var/lib/gpusel/leases"), "this machine has a shared lease store: no scope note to test")
class ScopeNoteTest(Case):
    """Without a shared lease store, `run` says leases bind only this user's jobs: once a day, never
    under --quiet, naming `gpusel setup` (no sudo for root) and GPUSEL_LEASE_DIR, its off switch."""

    def setUp(self):
        self.home = tempfile.mkdtemp(prefix="gpusel-note-")
        self.addCleanup(shutil.rmtree, self.home, True)
        self.state = os.path.join(self.home, "state")
        os.mkdir(self.state, 0o700)
        self.stamp = os.path.join(self.state, "gpusel", "lease-scope-note-day")

    def run_job(self, *flags):
        r = run("dgx-h100", *flags, "--gpu", "0", "--", "true", GPUSEL_LEASE_DIR=None, HOME=self.home,
                XDG_STATE_HOME=self.state)
        self.assertEqual(r.returncode, 0, r.stderr)
        return [line for line in r.stderr.splitlines() if "leases bind only" in line]

    def test_quiet_never_says_it(self):
        self.assertEqual(self.run_job("--quiet"), [])
        # --quiet used up nothing: the next plain run still says it.
        self.assertEqual(len(self.run_job()), 1)

    def test_said_once_a_day_and_names_its_off_switch(self):
        first = self.run_job()
        self.assertEqual(len(first), 1)
        note = first[0]
        # Short: under 200 characters besides the user's own store's path.
        self.assertLess(len(note.replace(os.path.join(self.state, "gpusel", "leases"), "")), 200, note)
        self.assertIn("GPUSEL_LEASE_DIR=", note)
        self.assertIn("gpusel setup", note)
        if os.geteuid() == 0:
            self.assertNotIn("sudo", note)
        self.assertEqual(self.run_job(), [])
        # A stamp from another day: said again.
        with open(self.stamp, "w") as f:
            f.write("2000-01-01")
        self.assertEqual(len(self.run_job()), 1)


if __name__ == "__main__":
    unittest.main()
