# %% [markdown]
# # Your fused add + RMSNorm against kerneleval
#
# A notebook-style script (cells marked `# %%`, as Jupyter, VS Code and `jupytext` read
# them; or run it whole with `python compare_with_torch.py --target localhost:50051`).
#
# It takes a PyTorch implementation of the operation (the one you are writing, here a plain
# eager one), runs it and kerneleval on the same inputs, compares both with an fp64
# reference computed here, and puts your timing beside the server's. Without torch it
# falls back to numpy for "your" function, so that it runs anywhere.
#
# Start a server first: `build/server/kerneleval-server --listen 127.0.0.1:50051`.

# %%
from __future__ import annotations

import argparse
import time

import ml_dtypes
import numpy as np

from kerneleval import Client, custom_suite

parser = argparse.ArgumentParser(description="compare a PyTorch function with kerneleval")
parser.add_argument("--target", default="localhost:50051")
parser.add_argument("--token", default=None)
parser.add_argument("--batch", type=int, default=79)
parser.add_argument("--hidden", type=int, default=2048)
parser.add_argument("--device", default="", help="kerneleval device; empty = least loaded")
args, _ = parser.parse_known_args()  # tolerate a notebook kernel's own arguments

try:
    import torch
except ImportError:
    torch = None

# %% [markdown]
# ## The function under test
# `s = x + r` in fp32, `out = s * rsqrt(mean(s^2) + eps) * w`, both rounded once to the
# input dtype: the README's definition.

# %%
EPS = 1e-6


def my_fused_add_rmsnorm(x, r, w, eps: float = EPS):
    """Yours goes here. Returns (output, residual_out)."""
    if torch is not None and isinstance(x, torch.Tensor):
        s = x.float() + r.float()
        out = s * torch.rsqrt(s.pow(2).mean(-1, keepdim=True) + eps) * w.float()
        return out.to(x.dtype), s.to(x.dtype)
    s = x.astype(np.float32) + r.astype(np.float32)
    out = s / np.sqrt(np.mean(s * s, axis=-1, keepdims=True) + eps) * w.astype(np.float32)
    return out.astype(x.dtype), s.astype(x.dtype)


def fp64_reference(x: np.ndarray, r: np.ndarray, w: np.ndarray, eps: float = EPS) -> np.ndarray:
    s = x.astype(np.float64) + r.astype(np.float64)
    return s / np.sqrt(np.mean(s * s, axis=-1, keepdims=True) + eps) * w.astype(np.float64)


def as_numpy(t) -> np.ndarray:
    if torch is not None and isinstance(t, torch.Tensor):
        t = t.detach().cpu()
        if t.dtype == torch.bfloat16:
            return t.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
        return t.numpy()
    return np.asarray(t)


# %% [markdown]
# ## Same inputs for both

# %%
rng = np.random.default_rng(200)
bf16 = ml_dtypes.bfloat16
x_np = rng.standard_normal((args.batch, args.hidden)).astype(bf16)
r_np = rng.standard_normal((args.batch, args.hidden)).astype(bf16)
w_np = (1 + 0.1 * rng.standard_normal(args.hidden)).astype(bf16)
if torch is not None:
    dev = "cuda" if torch.cuda.is_available() else "cpu"

    def to_torch(a: np.ndarray):
        return torch.from_numpy(a.view(np.int16)).view(torch.bfloat16).to(dev)

    x, r, w = to_torch(x_np), to_torch(r_np), to_torch(w_np)
else:
    x, r, w = x_np, r_np, w_np

# %% [markdown]
# ## Run both, and check both against fp64

# %%
mine, _ = my_fused_add_rmsnorm(x, r, w)
if torch is not None and x.is_cuda:
    torch.cuda.synchronize()
t0 = time.perf_counter()
for _ in range(20):
    mine, _ = my_fused_add_rmsnorm(x, r, w)
if torch is not None and x.is_cuda:
    torch.cuda.synchronize()
my_seconds = (time.perf_counter() - t0) / 20

with Client(args.target, token=args.token, timeout=120) as client:
    served = client.run(
        x, r, w, mode="output", eps=EPS, check=True, device=args.device, warmup=5, repetitions=20
    )

ref = fp64_reference(x_np, r_np, w_np)
tol = 1e-2  # bf16: |out - ref| <= tol + tol * |ref|, the service's rule
for name, out in (("yours", mine), ("kerneleval", served.output)):
    err = np.abs(as_numpy(out).astype(np.float64) - ref)
    ok = bool(np.all(err <= tol + tol * np.abs(ref)))
    print(f"{name:>10}: max |err| vs fp64 {err.max():.3e}  {'PASS' if ok else 'FAIL'}")
diff = np.abs(as_numpy(mine).astype(np.float64) - as_numpy(served.output).astype(np.float64))
print(f"yours vs kerneleval: max |diff| {diff.max():.3e}")

# %% [markdown]
# ## Timing side by side
# Yours is host wall time around the call (what a Python loop sees); kerneleval's is what
# its timer says (`timer`), on the device it ran on.

# %%
where = f"torch {x.device}" if torch is not None else "numpy"
print(f"yours      : {my_seconds * 1e6:9.1f} us  (host clock, {where})")
sol = f", SOL {served.sol_ratio * 100:.0f}%" if served.sol_ratio else ""
print(
    f"kerneleval : {served.median_seconds * 1e6:9.1f} us  ({served.timer}, "
    f"{served.implementation} on {served.device}, {served.bytes_per_second / 1e9:.1f} GB/s{sol})"
)

# %% [markdown]
# ## A small sweep on the server, as a table

# %%
with Client(args.target, token=args.token, timeout=600) as client:
    suite = custom_suite(
        "example_sweep", batch_sizes=[1, 79, 512], hidden_size=args.hidden, dtype="bf16"
    )
    report = client.bench(
        suite,
        device=args.device,
        warmup=2,
        repetitions=10,
        on_progress=lambda p: print(
            f"  workload {p.workload_index + 1}/{p.workload_count}: {p.workload}"
        ),
    )
for row in report.rows():
    print(
        f"{row['workload']:>16} {row['implementation']:>14} {row['median_us']:9.1f} us "
        f"{row['gb_per_s']:7.1f} GB/s  {row['status']}"
    )
try:
    print(
        report.to_pandas().pivot_table(
            index="workload", columns="implementation", values="median_us"
        )
    )
except ImportError:
    pass  # pandas is optional
