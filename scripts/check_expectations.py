#!/usr/bin/env python3
"""Checks a benchmark report (`kerneleval bench --format json`) against what a GPU script
expects of each implementation and prints one line per implementation:

  check_expectations.py REPORT --ranked NAME... --rejected NAME... --any NAME...

--ranked: every workload PASSED and ranked. --rejected: no workload PASSED or ranked (a
planted cheat: REJECTED, INCORRECT or a runtime error); the line quotes the first finding,
which names the checked call that failed. --any: reported, no expectation (a cheat the
protocol cannot expose, e.g. skipping repeated inputs in hot graph replay of L2-resident
workloads). Exits 1 when anything is not as expected."""
import argparse
import json
import sys


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("report")
    parser.add_argument("--ranked", nargs="*", default=[])
    parser.add_argument("--rejected", nargs="*", default=[])
    parser.add_argument("--any", nargs="*", default=[])
    args = parser.parse_args()
    with open(args.report) as f:
        results = json.load(f).get("results", [])
    ok = True
    wanted = ([(n, True) for n in args.ranked] + [(n, False) for n in args.rejected] +
              [(n, None) for n in args.any])
    for name, want_ranked in wanted:
        rows = [r for r in results if r.get("implementation") == name]
        # The CLI prints the contract's short names ("passed"); older reports the enum's.
        status = lambda r: r.get("status", "").replace("RESULT_STATUS_", "").lower()
        statuses = sorted({status(r) for r in rows})
        ranked = [r for r in rows if status(r) == "passed" and int(r.get("rank", 0)) > 0]
        if want_ranked is None:
            good, verdict, expected = True, "INFO", "no expectation"
        else:
            good = bool(rows) and (len(ranked) == len(rows) if want_ranked else not ranked)
            verdict = "OK" if good else "UNEXPECTED"
            expected = ("ranked" if want_ranked else "never ranked") + " expected"
        ok = ok and good
        finding = next((r.get("error", "") for r in rows if r.get("error")), "")
        print(f"{verdict} {name}: {expected}; {len(rows)} workloads, {len(ranked)} ranked, statuses {','.join(statuses) or '-'}"
              + (f"; first finding: {finding[:300]}" if finding else ""))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
