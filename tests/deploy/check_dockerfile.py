#!/usr/bin/env python3
"""Check deploy/docker/Dockerfile without building it (no registry or daemon needed).

    check_dockerfile.py DOCKERFILE
    check_dockerfile.py --release [--build-arg NAME=VALUE]... DOCKERFILE

- every FROM names its base through a build argument, so that a release pins
  each base by digest (--build-arg ...@sha256:...) without editing the file;
- the server stage starts from CUDA's `-base` image (cudart only), not
  `-runtime` (every CUDA library), and installs its packages from the list the
  build stage pinned (package=version, runtime-packages.sh);
- a `cli` stage exists for CPU-only jobs: not a CUDA image, no NVIDIA_*
  environment, only the CLI's packages;
- the build stage installs what the project's own dependency script installs
  for building (scripts/install-deps.sh), so the image cannot lag behind it.

--release checks only what a release build (deploy/docker/release.sh) needs: with the given
build arguments over the Dockerfile's defaults, every stage's base is pinned by digest
(`name[:tag]@sha256:<64 hex>`).

Exit status: 0 valid, 1 findings, 2 unreadable input.
"""

import argparse
import pathlib
import re
import sys

REPO = pathlib.Path(__file__).resolve().parents[2]
# install-deps.sh packages the image's build does not need (tests, tools, other compilers).
NOT_FOR_THE_IMAGE = {"build-essential", "ca-certificates", "curl", "libgtest-dev", "libgmock-dev",
                     "prometheus", "prometheus-pushgateway", "yamllint", "python3", "python3-yaml",
                     "clang-format", "openssl", "clang", "libclang-rt-14-dev", "python3-venv",
                     "postgresql", "ccache",  # ccache: for machines that build again
                     "chromium"}  # lays out the HTML report in a client test


def stages(text):
    """[(name, base, body)] of the Dockerfile's stages."""
    out = []
    for match in re.finditer(r"^FROM\s+(\S+)(?:\s+AS\s+(\S+))?\s*$(.*?)(?=^FROM\s|\Z)", text, re.M | re.S):
        out.append((match.group(2) or "", match.group(1), match.group(3)))
    return out


DIGEST_PINNED = re.compile(r"^[^@\s]+@sha256:[0-9a-f]{64}$")


def release_problems(found, resolve):
    """Stages whose base, as built, is not pinned by digest."""
    return [f"stage {name or '?'}: base {resolve(base)!r} is not pinned by digest (name@sha256:<64 hex>)"
            for name, base, _ in found if not DIGEST_PINNED.match(resolve(base))]


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--release", action="store_true")
    parser.add_argument("--build-arg", action="append", default=[], metavar="NAME=VALUE")
    parser.add_argument("dockerfile")
    options = parser.parse_args(argv[1:])
    try:
        text = pathlib.Path(options.dockerfile).read_text(encoding="utf-8")
    except OSError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    args = dict(re.findall(r"^ARG\s+(\w+)=(\S+)\s*$", text, re.M))
    problems = []
    found = stages(text)
    if options.release:
        args.update(a.split("=", 1) for a in options.build_arg if "=" in a)

        def resolve_release(base):
            value = re.sub(r"\$\{(\w+)\}", lambda m: args.get(m.group(1), m.group(0)), base)
            return re.sub(r"\$\{(\w+)\}", lambda m: args.get(m.group(1), m.group(0)), value)
        problems = release_problems(found, resolve_release)
        for problem in problems:
            print(f"{options.dockerfile}: {problem}", file=sys.stderr)
        print(f"{len(found)} stages, {len(problems)} unpinned bases")
        return 1 if problems else 0
    by_name = {name: (base, body) for name, base, body in found}
    for name, base, _ in found:
        if not re.fullmatch(r"\$\{\w+\}", base):
            problems.append(f"stage {name or '?'}: FROM {base} is fixed; name it through an ARG to pin a digest")

    def resolved(base):
        value = args.get(base.strip("${}"), "")
        return re.sub(r"\$\{(\w+)\}", lambda m: args.get(m.group(1), m.group(0)), value)

    server = by_name.get("server")
    if server is None or found[-1][0] != "server":
        problems.append("the last (default) stage must be `server`")
    else:
        base = resolved(server[0])
        if "-base-" not in base:
            problems.append(f"server stage base {base!r}: use CUDA's -base image plus the needed libraries")
        if "server-packages.txt" not in server[1]:
            problems.append("server stage must install the pinned server-packages.txt")
    cli = by_name.get("cli")
    if cli is None:
        problems.append("no `cli` stage for CPU-only jobs")
    else:
        base = resolved(cli[0])
        if "cuda" in base or "nvidia" in base:
            problems.append(f"cli stage base {base!r} is a CUDA image")
        if re.search(r"^ENV\s+NVIDIA_", cli[1], re.M):
            problems.append("cli stage sets NVIDIA_* variables")
        if "cli-packages.txt" not in cli[1]:
            problems.append("cli stage must install the pinned cli-packages.txt")
    build = by_name.get("build")
    if build is None or "runtime-packages.sh" not in build[1]:
        problems.append("build stage must list runtime packages with runtime-packages.sh")
    else:
        deps = (REPO / "scripts/install-deps.sh").read_text(encoding="utf-8")
        listed = re.sub(r"#[^\n]*", "", re.search(r"packages=\((.*?)\)", deps, re.S).group(1))
        wanted = set(listed.split()) - NOT_FOR_THE_IMAGE
        missing = sorted(p for p in wanted if not re.search(rf"(?<![\w-]){re.escape(p)}(?![\w-])", build[1]))
        if missing:
            problems.append(f"build stage lacks packages scripts/install-deps.sh installs: {missing}")
    for problem in problems:
        print(f"{options.dockerfile}: {problem}", file=sys.stderr)
    print(f"{len(found)} stages, {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
