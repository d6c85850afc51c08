"""The Triton example timed by Triton's own launcher, on the GPU machine: for each batch of a
suite, the median of triton.testing.do_bench (which clears the L2 cache before every call,
as the service's cold protocol does), with the kernel compiled by that machine's Triton.
The service must not make a kernel slower than its author measures it: read these beside
the service's cold medians for the same kernel (scripts/gpu-cheat-matrix.sh, examples_cold).

    python3 scripts/triton_own_launch.py suites/fused_add_rmsnorm_h2048.json
"""

from __future__ import annotations

import json
import pathlib
import sys

import torch
import triton

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "examples" / "submissions"
                       / "triton"))
from add_rmsnorm import add_rmsnorm  # noqa: E402


def main() -> None:
    suite = json.loads(pathlib.Path(sys.argv[1]).read_text())
    hidden = suite["axes"]["hidden_size"]["value"]
    eps = float(suite["eps"])
    store_residual = suite.get("mode", "output") != "output"
    print(f"triton {triton.__version__}, torch {torch.__version__}, "
          f"{torch.cuda.get_device_name()}")
    print("| batch | median us (do_bench, L2 cleared) |")
    print("|---:|---:|")
    for workload in suite["workloads"]:
        batch = workload["axes"]["batch_size"]
        x, r = (torch.randn(batch, hidden, device="cuda", dtype=torch.bfloat16) for _ in "xr")
        w = torch.randn(hidden, device="cuda", dtype=torch.bfloat16)
        out = torch.empty_like(x)
        res_out = torch.empty_like(x) if store_residual else out

        def call() -> None:
            add_rmsnorm[(batch,)](x, r, w, out, res_out, hidden, hidden, eps,
                                  BLOCK=triton.next_power_of_2(hidden),
                                  STORE_RESIDUAL=store_residual, num_warps=8)

        ms = triton.testing.do_bench(call, warmup=25, rep=200, return_mode="median")
        print(f"| {batch} | {ms * 1e3:.2f} |")


if __name__ == "__main__":
    main()
