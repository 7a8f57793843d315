"""The first hour (issue 12): the usual mistakes of a newcomer, each fed to gpusel, each answered
with a message that says what happened and what to do instead."""

import unittest

from support import Case, gpusel


class UnknownCommandTest(Case):
    def test_placeholder_runs(self):
        self.assertEqual(gpusel("--version").returncode, 0)


if __name__ == "__main__":
    unittest.main()
