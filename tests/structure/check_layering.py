#!/usr/bin/env python3
"""Check that every project include goes down the rooms' order, and that no room has a cycle.

    check_layering.py [--root DIR]

A room is a top-level folder (kernels/, common/, metrics/, client/) or a folder of server/
(server/core/, server/cuda/, ...). ROOMS below says which rooms each may include; an
`#include "ROOM/..."` of any other room is listed as climbing, with its file and line.
Inside a room, a module is a header and its sources (x.h, x.cc, x.cu, x_test.cc do not
count: tests live under tests/); a cycle of modules (client/cli.h -> submit_command.h and
submit_command.cc -> cli.h) is listed too, since it ties the modules into one.

The table is the architecture (docs/architecture.md, "Rooms"): a change that needs a new
edge changes it here, in review, rather than by an include nobody notices.

Exit status: 0 when every include is allowed and no cycle exists, 1 otherwise.
"""

import argparse
import pathlib
import re
import sys

# Room -> the rooms it may include (besides itself). Bottom to top.
_BASE = ("kernels", "common")
ROOMS = {
    "kernels": (),
    "common": ("kernels",),
    "metrics": _BASE,
    "client": _BASE + ("metrics",),
    # server/: plumbing and leaves first.
    "server/grpc": _BASE,
    "server/metrics": _BASE + ("metrics",),
    "server/driver": _BASE,
    "server/identity": _BASE + ("server/metrics",),
    # The figures of a measurement: statistics, SOL, correctness, the kernel breakdown.
    "server/figures": _BASE,
    # The Backend interface, device workers and hosts, the CPU backend, the per-call checks
    # a backend carries out.
    "server/device": _BASE + ("server/metrics", "server/grpc", "server/figures"),
    # prepare -> measure -> check -> report on any Backend.
    "server/evaluation": _BASE + ("server/device", "server/figures", "server/metrics"),
    # Submitted kernels: rules, the compile jail, the registry, the launcher.
    "server/submissions": _BASE + ("server/driver", "server/grpc", "server/identity"),
    # The CUDA backend: a Backend (device/) that computes its figures (figures/) and launches
    # submissions through their launcher; evaluation/ drives it and is never included by it.
    "server/cuda": _BASE + ("server/driver", "server/device", "server/figures",
                            "server/submissions", "server/metrics"),
    # Storage only.
    "server/store": _BASE + ("metrics", "server/grpc", "server/identity", "server/submissions"),
    # Front-agnostic entry points: Run, Benchmark, admission, validation, the service state.
    "server/core": _BASE + ("metrics", "server/grpc", "server/metrics", "server/identity",
                            "server/device", "server/figures", "server/evaluation",
                            "server/submissions", "server/store"),
}
_BELOW_FRONTS = tuple(r for r in ROOMS if r.startswith("server/")) + _BASE + ("metrics",)
# The fronts: each over the core, none over another.
ROOMS["server/rpc"] = _BELOW_FRONTS
ROOMS["server/oip"] = _BELOW_FRONTS
ROOMS["server/queue"] = _BELOW_FRONTS
# Process assembly: flags, credentials, the device factory, the mains. Includes anything.
ROOMS["server/app"] = tuple(ROOMS) + ("server/rpc", "server/oip", "server/queue")

_SOURCES = (".h", ".cc", ".cu", ".cuh")
_INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def room_of(path):
    """The room of a path relative to the root ('server/cuda', 'client'), or None."""
    parts = pathlib.PurePosixPath(path).parts
    if len(parts) >= 3 and parts[0] == "server":
        return f"server/{parts[1]}"
    if len(parts) >= 2 and parts[0] in ROOMS:
        return parts[0]
    return None


def module_of(path):
    """x.h and x.cc of one folder are one module."""
    p = pathlib.PurePosixPath(path)
    return str(p.with_suffix(""))


def includes(root):
    """(file, line, included path) of every quoted project include under the rooms."""
    found = []
    for top in ("kernels", "common", "metrics", "client", "server"):
        for file in sorted((root / top).rglob("*")):
            if file.suffix not in _SOURCES or not file.is_file():
                continue
            rel = file.relative_to(root).as_posix()
            if "/python/" in rel:
                continue
            for number, text in enumerate(file.read_text(errors="replace").splitlines(), 1):
                match = _INCLUDE.match(text)
                if match and room_of(match.group(1)) is not None:
                    found.append((rel, number, match.group(1)))
    return found


def climbing(edges):
    """Includes whose room may not include the included one's."""
    bad = []
    for rel, number, target in edges:
        source, dest = room_of(rel), room_of(target)
        if source is None or source == dest:
            continue
        if source not in ROOMS:
            bad.append(f"{rel}:{number}: room {source} is not in the table")
        elif dest not in ROOMS[source]:
            bad.append(f"{rel}:{number}: {source} may not include {dest} ({target})")
    return bad


def module_cycles(edges):
    """Cycles between the modules of one room, each as 'a -> b -> a'."""
    graph = {}
    for rel, _, target in edges:
        if room_of(rel) != room_of(target):
            continue
        a, b = module_of(rel), module_of(target)
        if a != b:
            graph.setdefault(a, set()).add(b)
    cycles, state = [], {}

    def visit(node, stack):
        state[node] = "open"
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == "open":
                cycles.append(" -> ".join(stack[stack.index(nxt):] + [nxt]))
            elif nxt not in state:
                visit(nxt, stack)
        stack.pop()
        state[node] = "done"

    for node in sorted(graph):
        if node not in state:
            visit(node, [])
    return cycles


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=pathlib.Path,
                        default=pathlib.Path(__file__).resolve().parents[2])
    args = parser.parse_args(argv)
    edges = includes(args.root)
    bad = climbing(edges)
    cycles = module_cycles(edges)
    for line in bad:
        print(f"climbs: {line}")
    for cycle in cycles:
        print(f"cycle: {cycle}")
    if bad or cycles:
        print(f"{len(bad)} climbing include(s), {len(cycles)} cycle(s); the rooms are in "
              "tests/structure/check_layering.py and docs/architecture.md", file=sys.stderr)
        return 1
    print(f"{len(edges)} includes checked across {len(ROOMS)} rooms: none climbs, no cycle")
    return 0


if __name__ == "__main__":
    sys.exit(main())
