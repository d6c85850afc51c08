#!/usr/bin/env python3
"""Pin the kerneleval images of the overlays by digest (a release step).

    deploy/k8s/set-images.py --server REGISTRY/kerneleval@sha256:<64 hex> \\
        --cli REGISTRY/kerneleval-cli@sha256:<64 hex> [OVERLAY_DIR...]

Rewrites the `images:` block of each overlay (default: every directory of
deploy/k8s/overlays) as `kustomize edit set image` would: the entry's `name`
stays the name the base renders (registry.invalid/kerneleval, ...), `newName`
and `digest` become the given reference's. Only the `images:` block changes;
comments and the other keys stay. A reference without a digest is refused: a
tag can be re-pushed under a running fleet.
"""

import argparse
import pathlib
import re
import sys

OVERLAYS = pathlib.Path(__file__).resolve().parent / "overlays"
# The names the base's containers carry (deploy/k8s/base/kustomization.yaml).
SERVER_NAME = "registry.invalid/kerneleval"
CLI_NAME = "registry.invalid/kerneleval-cli"
DIGEST_REF = re.compile(r"^(?P<name>[^@\s]+)@(?P<digest>sha256:[0-9a-f]{64})$")
IMAGES_BLOCK = re.compile(r"^images:\n(?:(?:[ \t].*)?\n)*", re.M)


def parse_reference(flag, reference):
    match = DIGEST_REF.match(reference)
    if not match:
        raise ValueError(f"{flag} {reference[:200]!r}: want NAME@sha256:<64 lowercase hex>")
    return match["name"], match["digest"]


def images_block(pins):
    lines = ["images:\n"]
    for name, (new_name, digest) in pins:
        lines += [f"  - name: {name}\n", f"    newName: {new_name}\n", f"    digest: {digest}\n"]
    return "".join(lines)


def rewrite(text, pins):
    block = images_block(pins)
    if IMAGES_BLOCK.search(text):
        return IMAGES_BLOCK.sub(lambda _: block, text, count=1)
    return text.rstrip("\n") + "\n\n" + block


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--server", required=True, help="REGISTRY/kerneleval@sha256:...")
    parser.add_argument("--cli", required=True, help="REGISTRY/kerneleval-cli@sha256:...")
    parser.add_argument("overlays", nargs="*", type=pathlib.Path)
    args = parser.parse_args(argv)
    try:
        pins = [(SERVER_NAME, parse_reference("--server", args.server)),
                (CLI_NAME, parse_reference("--cli", args.cli))]
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    overlays = args.overlays or sorted(p for p in OVERLAYS.iterdir() if p.is_dir())
    for overlay in overlays:
        path = overlay / "kustomization.yaml"
        if not path.is_file():
            print(f"error: {path}: no kustomization.yaml", file=sys.stderr)
            return 2
        path.write_text(rewrite(path.read_text(encoding="utf-8"), pins), encoding="utf-8")
        print(f"{path}: {args.server} and {args.cli}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
