"""The self-test the header checks share: a check must pass on an unchanged copy of the sources and
fail on each deliberate drift (a mutation: one text replaced in one file of the copy)."""

import os
import shutil
import tempfile


def run_mutations(source, folders, mutations, check, what):
    """Copies `folders` (relative to `source`, machine files left out) to a scratch tree, once per
    mutation (file relative to the scratch tree, text, replacement), and calls check(tree,
    mutation): 0 must come back for the unchanged copy (mutation None), 1 (a drift found) for each
    mutation. Prints what went wrong, or one line saying all held; returns the exit status."""
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        for i, mutation in enumerate([None] + list(mutations)):
            for folder in folders:
                shutil.rmtree(os.path.join(tmp, folder), ignore_errors=True)
                shutil.copytree(os.path.join(source, folder), os.path.join(tmp, folder),
                                ignore=shutil.ignore_patterns("machines"))
            if mutation is not None:
                name, old, new = mutation
                path = os.path.join(tmp, name)
                with open(path) as f:
                    text = f.read()
                if old not in text:
                    failures.append(f"mutation {i}: {old!r} is no longer in {name}; update MUTATIONS")
                    continue
                with open(path, "w") as f:
                    f.write(text.replace(old, new, 1))
            rc = check(tmp, mutation)
            if mutation is None and rc != 0:
                failures.append("the unchanged copy fails the check")
            elif mutation is not None and rc != 1:
                failures.append(f"mutation {i} ({mutation[0]}: {mutation[1]!r} -> {mutation[2]!r}) passes the check")
    for line in failures:
        print(line)
    if not failures:
        print(f"the check passes on {what} and fails on each of {len(mutations)} drifts")
    return 1 if failures else 0
