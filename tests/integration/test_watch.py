"""`gpusel list --watch`: in a terminal (a pseudo-terminal here) each listing replaces the last in
place and Ctrl-C ends it cleanly, leaving the terminal as it was; elsewhere, plain listings one
after another; with --json, one object a line."""

import json
import os
import pty
import re
import select
import shlex
import shutil
import signal
import subprocess
import tempfile
import time
import unittest

from support import BIN, MACHINES, Case, gpusel, sim_env


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


def many_gpu_machine(folder, count=32):
    """A machine file with `count` GPUs (each a copy of dgx-h100's first, with its own UUID and bus)."""
    with open(os.path.join(MACHINES, "dgx-h100.toml")) as f:
        text = f.read()
    head, _, rest = text.partition("[[gpu]]")
    gpu = "[[gpu]]" + rest.split("[[gpu]]")[0]
    gpu = re.sub(r'uuid = "[^"]*"', "uuid = \"{uuid}\"", gpu)
    gpu = re.sub(r'pci_bus_id = "[^"]*"', "pci_bus_id = \"{bus}\"", gpu)
    blocks = [gpu.replace("{uuid}", f"GPU-{i:08x}-1111-4222-8333-{i:012x}").replace("{bus}", f"00000000:{i + 16:02X}:00.0")
              for i in range(count)]
    path = os.path.join(folder, "many.toml")
    with open(path, "w") as f:
        f.write(head.replace('name = "dgx-h100"', 'name = "many"') + "".join(blocks))
    return path


@unittest.skipUnless(shutil.which("tmux"), "tmux is not installed (scripts/install-deps installs it)")
class WatchFitsTheTerminal(Case):
    """`list --watch` in tmux: rows never wrap (a narrower layout below the rows' width, lines cut at
    the edge), the title and header stay in view, and a last line says how many more rows there are."""

    def screen(self, width, height, machine=None):
        """The pane of `list --watch` on `machine` (a bundled one; default: 64 copies of a GPU)."""
        folder = tempfile.mkdtemp(prefix="gpusel-watch-")
        self.addCleanup(shutil.rmtree, folder, True)
        machine_file = machine or many_gpu_machine(folder)
        env = sim_env("dgx-h100", TERM="xterm")
        env.pop("LINES", None)
        env.pop("COLUMNS", None)
        script = os.path.join(folder, "watch.sh")
        with open(script, "w") as f:
            f.write("#!/bin/sh\n" + "".join(f"export {k}={shlex.quote(v)}\n" for k, v in env.items()) +
                    f"exec {shlex.quote(BIN)} --sim {shlex.quote(machine_file)} list --watch 0.2\n")
        os.chmod(script, 0o755)
        tmux = ["tmux", "-S", os.path.join(folder, "tmux.sock"), "-f", "/dev/null"]
        subprocess.run([*tmux, "new-session", "-d", "-x", str(width), "-y", str(height), script], check=True,
                       env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": folder})
        self.addCleanup(subprocess.run, [*tmux, "kill-server"], capture_output=True)
        deadline = time.monotonic() + 20
        text = ""
        while time.monotonic() < deadline:
            text = subprocess.run([*tmux, "capture-pane", "-p"], capture_output=True, text=True).stdout
            if "more line" in text or "UTIL" in text and text.rstrip().count("\n") >= height - 1 or (
                    machine and "note:" in text):
                break
            time.sleep(0.1)
        return text.rstrip("\n").split("\n")

    def check_common(self, lines, height):
        self.assertEqual(len(lines), height, lines)
        self.assertTrue(lines[0].startswith("gpusel list, every 0.2 s;"), lines)
        header = [line for line in lines if line.startswith("INDEX")]
        self.assertEqual(len(header), 1, lines)
        self.assertTrue(header[0].rstrip().endswith("UTIL"), header)  # the whole header on one line
        self.assertRegex(lines[-1], r"^-- \d+ more lines below")
        rows = [line for line in lines if re.match(r"^\d+ ", line)]
        self.assertGreater(len(rows), 10, lines)
        for row in rows:
            self.assertRegex(row.rstrip(), r"%$")  # each row ends with its UTIL, unwrapped
        return header[0], rows

    def test_80_columns_narrow_layout(self):
        lines = self.screen(80, 24)
        header, rows = self.check_common(lines, 24)
        self.assertNotIn("PCI BUS ID", header)
        self.assertNotIn("NUMA", header)
        self.assertRegex(rows[0], r"^0 +\S+ +GPU-00000000 +NVIDIA H100")
        self.assertTrue(all(len(line) <= 80 for line in lines), lines)

    def test_80_columns_amd_layout(self):
        # The AMD table gives way in the same order, so that its NAME column (last) stays in view.
        lines = self.screen(80, 24, "amd-mi210")
        header = [line for line in lines if line.startswith("INDEX")]
        self.assertEqual(len(header), 1, lines)
        self.assertNotIn("PCI BUS ID", header[0])
        self.assertTrue(header[0].rstrip().endswith("NAME"), header)
        rows = [line.rstrip() for line in lines if re.match(r"^\d+ ", line)]
        self.assertEqual(len(rows), 3, lines)
        for row in rows:
            self.assertRegex(row, r"^\d +\d +GPU-[0-9a-f]{8} .* AMD Instinct MI210$")
        self.assertTrue(all(len(line) <= 80 for line in lines), lines)
        wide = self.screen(160, 24, "amd-mi210")
        self.assertIn("PCI BUS ID", [line for line in wide if line.startswith("INDEX")][0])
        self.assertIn("GPU-3c4d5e6f708192a3", "\n".join(wide))

    def test_160_columns_full_layout(self):
        lines = self.screen(160, 24)
        header, rows = self.check_common(lines, 24)
        self.assertIn("PCI BUS ID", header)
        self.assertIn("NUMA", header)
        self.assertIn("GPU-00000000-1111-4222-8333-000000000000", rows[0])
