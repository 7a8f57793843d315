"""The reference module's answers, kept in the repository so that the tests that compare gpusel with
it never pass by skipping.

The reference module (gpu_select.py, the behaviour specification) lives beside the repository in
../shared/seed, which a clone may lack. Each answer a test needs is stored in
reference_answers/<module>.json under a key naming the case:
- where the module is present, the answer is computed with it, and a stored answer that differs, or
  is missing, fails the test (the stored copy must never drift from the specification);
- where it is absent, the stored answer is used;
- GPUSEL_RECORD_REFERENCE=1 (with the module present) writes the answers computed into the file
  instead of comparing: run it after adding a case, and commit the file.
"""

import json
import os

from support import SHARED

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "reference_answers")
SEED = os.path.join(SHARED, "seed")
PRESENT = os.path.exists(os.path.join(SEED, "gpu_select.py"))
RECORDING = os.environ.get("GPUSEL_RECORD_REFERENCE") == "1"


class Answers:
    """The stored answers of one test module (`name`: the file's name without .json)."""

    def __init__(self, name):
        self.path = os.path.join(HERE, name + ".json")
        try:
            with open(self.path) as f:
                self.stored = json.load(f)
        except FileNotFoundError:
            self.stored = {}

    def answer(self, key, compute):
        """The module's answer for `key`; `compute()` asks the module itself (only called where
        it is present)."""
        if not PRESENT:
            if key not in self.stored:
                raise AssertionError(
                    f"the reference module is absent ({SEED}) and {self.path} holds no answer for "
                    f"{key!r}: record it where the module is (GPUSEL_RECORD_REFERENCE=1)")
            return self.stored[key]
        value = compute()
        if RECORDING:
            self.stored[key] = value
            os.makedirs(HERE, exist_ok=True)
            with open(self.path, "w") as f:
                json.dump(self.stored, f, indent=1, sort_keys=True)
                f.write("\n")
        elif key not in self.stored or self.stored[key] != value:
            raise AssertionError(
                f"{self.path}: the stored answer for {key!r} is "
                f"{self.stored.get(key, 'missing')!r}, the reference module says {value!r}; "
                "record it again (GPUSEL_RECORD_REFERENCE=1) and commit the file")
        return value
