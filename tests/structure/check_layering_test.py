#!/usr/bin/env python3
"""The layering check fails on a planted climbing include and a planted cycle, and passes
on the tree as it is.

    check_layering_test.py

Copies the rooms' sources (headers and sources only) into a temporary folder, plants one
include that climbs (the Backend interface including the core's service state) and one
cycle (a client module and the CLI including each other), and runs check_layering.py on
each copy. Exit status 0 when the check tells each apart; 1 otherwise.
"""

import pathlib
import shutil
import subprocess
import sys
import tempfile

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[1]
CHECK = HERE / "check_layering.py"
SOURCES = (".h", ".cc", ".cu", ".cuh")


def copy_rooms(dest):
    for top in ("kernels", "common", "metrics", "client", "server"):
        for file in (ROOT / top).rglob("*"):
            if file.is_file() and file.suffix in SOURCES:
                target = dest / file.relative_to(ROOT)
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(file, target)


def check(root):
    done = subprocess.run([sys.executable, str(CHECK), "--root", str(root)],
                          capture_output=True, text=True, timeout=120)
    return done.returncode, done.stdout + done.stderr


def plant(path, line):
    text = path.read_text()
    marker = "#pragma once\n"
    assert marker in text, f"{path} has no #pragma once"
    path.write_text(text.replace(marker, marker + line + "\n", 1))


def main():
    failures = []
    rc, out = check(ROOT)
    if rc != 0:
        failures.append(f"the tree itself fails the check:\n{out}")
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        copy_rooms(tmp)
        rc, out = check(tmp)
        if rc != 0:
            failures.append(f"an unchanged copy fails the check:\n{out}")
        plant(tmp / "server/device/backend.h", '#include "server/core/service_state.h"')
        rc, out = check(tmp)
        wanted = "server/device/backend.h:"
        if rc != 1 or wanted not in out or "may not include server/core" not in out:
            failures.append(f"a climbing include passed (rc {rc}):\n{out}")
        plant(tmp / "client/text_table.h", '#include "client/report_format.h"')
        plant(tmp / "client/report_format.h", '#include "client/text_table.h"')
        rc, out = check(tmp)
        if rc != 1 or "cycle: " not in out or "client/text_table" not in out:
            failures.append(f"a cycle passed (rc {rc}):\n{out}")
    for failure in failures:
        print(f"FAIL: {failure}")
    if not failures:
        print("the check passes the tree and names a planted climbing include and cycle")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
