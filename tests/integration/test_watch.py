"""`gpusel list --watch`: in a terminal (a pseudo-terminal here) each listing replaces the last in
place and Ctrl-C ends it cleanly, leaving the terminal as it was; elsewhere, plain listings one
after another; with --json, one object a line."""

import json
import os
import pty
import select
import signal
import subprocess
import time

from support import BIN, Case, gpusel, sim_env


def read_until(fd, predicate, timeout=20):
    """Reads the pty's output until predicate(text) holds; returns the text."""
    data = b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.1)
        if ready:
            try:
                chunk = os.read(fd, 65536)
            except OSError:  # the other end closed
                break
            if not chunk:
                break
            data += chunk
            if predicate(data.decode("utf-8", "replace")):
                break
    return data.decode("utf-8", "replace")


class WatchTerminal(Case):
    def spawn(self, *args):
        env = sim_env("dgx-h100", TERM="xterm", LINES="50", COLUMNS="160")
        pid, fd = pty.fork()
        if pid == 0:  # the child: gpusel on the pty as its terminal
            os.execve(BIN, [BIN, *args], env)
        self.addCleanup(os.close, fd)
        return pid, fd

    def wait(self, pid, timeout=10):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                return os.waitstatus_to_exitcode(status)
            time.sleep(0.05)
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        self.fail("gpusel list --watch did not end")

    def test_refreshes_in_place_and_stops_on_ctrl_c(self):
        pid, fd = self.spawn("list", "--watch", "0.2")
        text = read_until(fd, lambda t: t.count("\x1b[H") >= 3)
        self.assertIn("\x1b[?1049h", text)  # the alternate screen
        self.assertGreaterEqual(text.count("\x1b[H"), 3, text)  # several listings, each from the top
        self.assertIn("GPU-4ba71ab7-ac05-04a5-6cc6-be1805fdf179", text)
        self.assertIn("every 0.2 s", text)
        # No listing is cleared before it is drawn (that is what flickers): each line is cleared
        # only to its end, the rest of the screen after the last line.
        self.assertNotIn("\x1b[2J", text)
        os.write(fd, b"\x03")  # Ctrl-C, as a terminal sends it: SIGINT to the foreground group
        rest = read_until(fd, lambda t: "\x1b[?1049l" in t and "INDEX" in t.split("\x1b[?1049l")[-1])
        self.assertEqual(self.wait(pid), 0)
        self.assertIn("\x1b[?25h", rest)  # the cursor shown again
        after = rest.split("\x1b[?1049l")[-1]
        self.assertIn("INDEX", after)  # the last listing stays on the screen
        self.assertNotIn("Traceback", rest)

    def test_shows_a_lease_when_one_is_taken(self):
        env = sim_env("dgx-h100")
        pid, fd = self.spawn("list", "--watch", "0.2")
        read_until(fd, lambda t: "INDEX" in t)
        holder = subprocess.Popen([BIN, "run", "--quiet", "--gpu", "5", "--", "sleep", "30"], env=env,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            text = read_until(fd, lambda t: "leased by" in t)
            self.assertIn("leased by", text)
        finally:
            holder.terminate()
            holder.wait(timeout=20)
            os.kill(pid, signal.SIGINT)
            self.assertEqual(self.wait(pid), 0)


class WatchPlain(Case):
    def collect(self, *args):
        p = subprocess.Popen([BIN, *args], env=sim_env("dgx-h100"), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
        time.sleep(1.0)
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=20)
        return p.returncode, out, err

    def test_plain_listings_when_not_a_terminal(self):
        code, out, err = self.collect("list", "--watch", "0.2")
        self.assertEqual(code, 0, err)
        self.assertNotIn("\x1b", out)  # no escape sequences in a file or a pipe
        self.assertGreaterEqual(out.count("INDEX"), 2, out)
        self.assertGreaterEqual(out.count("=== "), 2, out)

    def test_json_lines(self):
        code, out, err = self.collect("list", "--json", "--watch", "0.2")
        self.assertEqual(code, 0, err)
        objects = [json.loads(line) for line in out.splitlines()]
        self.assertGreaterEqual(len(objects), 2)
        self.assertEqual(len(objects[0]["gpus"]), 8)

    def test_bad_interval(self):
        for value in ("0", "-1", "abc", "nan"):
            with self.subTest(value=value):
                self.assertFailsWith(gpusel("--sim", "dgx-h100", "list", f"--watch={value}"), 2, "--watch")

    def test_without_nvml_it_fails_at_once(self):
        r = subprocess.run([BIN, "--sim", "nvml-missing", "list", "--watch", "0.2"], capture_output=True, text=True,
                           env=sim_env("dgx-h100"), timeout=20)
        self.assertEqual(r.returncode, 1)
        self.assertIn("NVML is unavailable", r.stderr)
