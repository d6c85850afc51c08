#!/usr/bin/env python3
"""Prints the planted cheats' matrix from the reports of scripts/gpu-cheat-matrix.sh: one row
per cheat, one column per (protocol, naming, RPC), each cell the statuses it got and OK where
it was never ranked (or, for the columns a cheat has nothing to gain in, where any outcome is
acceptable: marked '~'). Exits 1 when a cell that must be unranked was ranked.

usage: cheat_matrix.py OUT_DIR  (reads columns.json there: [{"name", "report" | "runs"}], and
                                 expect.json: {cheat: {column: "never" | "any"}})
"""
import json
import os
import sys


def statuses_of_report(path, impl):
    with open(path) as f:
        rows = [r for r in json.load(f).get("results", []) if r.get("implementation") == impl]
    status = lambda r: str(r.get("status", "")).replace("RESULT_STATUS_", "").lower()
    ranked = sum(1 for r in rows if status(r) == "passed" and int(r.get("rank", 0)) > 0)
    return sorted({status(r) for r in rows}), ranked, len(rows)


def main():
    out = sys.argv[1]
    columns = json.load(open(os.path.join(out, "columns.json")))
    expect = json.load(open(os.path.join(out, "expect.json")))
    ok = True
    header = "| cheat | " + " | ".join(c["name"] for c in columns) + " |"
    print(header)
    print("|---" * (len(columns) + 1) + "|")
    for cheat, wants in expect.items():
        cells = []
        for c in columns:
            want = wants.get(c["name"], "never")
            impl = c.get("impl_prefix", "cheat_") + cheat if "ids" not in c else c["ids"].get(cheat)
            if impl is None:
                cells.append("not registered")
                continue
            if "report" in c:
                path = os.path.join(out, c["report"])
                if not os.path.exists(path):
                    cells.append("no report")
                    ok = ok and want == "any"
                    continue
                st, ranked, n = statuses_of_report(path, impl)
            else:  # Run: one line "<impl> <status>" per cheat in the runs file
                st, ranked, n = ["missing"], 0, 0
                for line in open(os.path.join(out, c["runs"])):
                    name, _, status = line.strip().partition(" ")
                    if name == impl:
                        st, ranked, n = [status], 1 if status == "passed" else 0, 1
            good = ranked == 0 or want == "any"
            ok = ok and good
            mark = ("OK" if ranked == 0 else "~") if good else "RANKED"
            cells.append(f"{mark} {','.join(st)} ({ranked}/{n} ranked)")
        print(f"| {cheat} | " + " | ".join(cells) + " |")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
