#!/usr/bin/env python3
"""PyTorch peers of the fused residual-add + RMSNorm kernel: eager and torch.compile.

The op is OUTPUT mode with the project's numerics: s = x + r in fp32, variance and
normalization from the fp32 s, one rounding at the end. Inputs are random normal values of
the dtype. Two protocols, the same as kerneleval-kernel-bench:

  cold   L2 flushed before every call (zeroing a buffer of 2x the L2 size, as
         triton.testing.do_bench does), CUDA events around one call, median of --reps.
         Events include the host time of launching the call's kernels when that exceeds the
         flush (small batches, torch.compile's guards): compare small batches on graph times.
  graph  --graph-calls calls captured in one torch.cuda.CUDAGraph, replayed; per-call time,
         median over the replays. Inputs rotate over copies when one call's bytes exceed
         L2/2, as in the kernel benchmark.

Usage: python3 scripts/torch_peers.py [--batches 1,6,34] [--hidden 2048] [--json PATH]
"""

import argparse
import json
import statistics
import sys

import torch

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
TOLERANCE = {"bf16": 1e-2, "fp16": 2e-3, "fp32": 1e-5}
EPS = 1e-6


def fused_add_rmsnorm(x, r, w):
    s = x.float() + r.float()
    return (s * torch.rsqrt(s.pow(2).mean(-1, keepdim=True) + EPS) * w.float()).to(x.dtype)


def attribute_peak_gbps():
    """Memory clock x bus width x 2 / 8 from NVML, or None without NVML."""
    try:
        import pynvml

        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByIndex(torch.cuda.current_device())
        clock_mhz = pynvml.nvmlDeviceGetMaxClockInfo(handle, pynvml.NVML_CLOCK_MEM)
        bus_bits = pynvml.nvmlDeviceGetMemoryBusWidth(handle)
        return clock_mhz * 1e6 * bus_bits / 8 * 2 / 1e9
    except Exception:  # no NVML: report GB/s without a percentage
        return None


def time_cold(fn, args, flush, reps, warmup=5):
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    for i in range(-warmup, reps):
        flush.zero_()
        if i >= 0:
            starts[i].record()
        fn(*args)
        if i >= 0:
            ends[i].record()
    torch.cuda.synchronize()
    times = [s.elapsed_time(e) * 1e3 for s, e in zip(starts, ends)]
    return statistics.median(times), min(times)


def time_graph(fn, sets, calls, replays):
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for i in range(3):
            fn(*sets[i % len(sets)])
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    outputs = []
    with torch.cuda.graph(graph):
        for i in range(calls):
            outputs.append(fn(*sets[i % len(sets)]))
    graph.replay()
    graph.replay()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(replays)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(replays)]
    for i in range(replays):
        starts[i].record()
        graph.replay()
        ends[i].record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) * 1e3 / calls for s, e in zip(starts, ends))


def check(fn, x, r, w, tol):
    """Largest |out - ref| / (tol + tol |ref|) against an fp64 reference (pass: <= 1)."""
    out = fn(x, r, w).double()
    s = x.double() + r.double()
    ref = s * torch.rsqrt(s.pow(2).mean(-1, keepdim=True) + EPS) * w.double()
    err = (out - ref).abs() / (tol + tol * ref.abs())
    return float(err.max()) if torch.isfinite(err).all() else float("inf")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", default="1,6,34,64,79,12383,16254")
    parser.add_argument("--hidden", type=int, default=2048)
    parser.add_argument("--dtype", choices=sorted(DTYPES), default="bf16")
    parser.add_argument("--reps", type=int, default=100)
    parser.add_argument("--graph-calls", type=int, default=50)
    parser.add_argument("--graph-replays", type=int, default=20)
    parser.add_argument("--no-compile", action="store_true", help="eager only")
    parser.add_argument("--json", help="also write the results to this file")
    opts = parser.parse_args()

    if not torch.cuda.is_available():
        print("no CUDA device", file=sys.stderr)
        return 1
    dtype = DTYPES[opts.dtype]
    elem = torch.tensor([], dtype=dtype).element_size()
    props = torch.cuda.get_device_properties(0)
    l2 = props.L2_cache_size
    peak = attribute_peak_gbps()
    protocol = (
        f"timer: CUDA events (torch.cuda.Event). cold: L2 flushed before each call by zeroing "
        f"{2 * l2 / 2**20:.0f} MiB (2x L2), events around one call, median (and min) of "
        f"{opts.reps} after 5 warm-ups. graph: {opts.graph_calls} calls in one "
        f"torch.cuda.CUDAGraph, median per-call time over {opts.graph_replays} replays; inputs "
        f"rotated over copies when one call's bytes exceed L2/2."
    )
    print(f"device: {props.name}, {props.multi_processor_count} SMs, L2 {l2 / 2**20:.1f} MiB, "
          f"attribute peak {peak:.1f} GB/s" if peak else f"device: {props.name} (no NVML peak)")
    print(f"torch {torch.__version__}; op: {opts.dtype} output hidden {opts.hidden}, eps {EPS}")
    print(protocol)

    impls = [("torch-eager", fused_add_rmsnorm)]
    if not opts.no_compile:
        impls.append(("torch-compile", torch.compile(fused_add_rmsnorm, dynamic=False)))

    flush = torch.empty(2 * l2, dtype=torch.int8, device="cuda")
    gen = torch.Generator(device="cuda").manual_seed(0)
    w = torch.randn(opts.hidden, device="cuda", generator=gen).to(dtype)
    results = []
    print(f"\n{'impl':<14} {'batch':>7} {'cold_us':>9} {'cold_min':>9} {'GB/s':>8} {'%peak':>6} "
          f"{'graph_us':>9} {'GB/s':>8} {'%peak':>6} {'sets':>5} {'check':>6}")
    for batch in [int(b) for b in opts.batches.split(",")]:
        bytes_moved = (3 * batch * opts.hidden + opts.hidden) * elem
        sets = 1
        if bytes_moved > l2 // 2:
            sets = min(max(2, 3 * l2 // bytes_moved + 1), opts.graph_calls)
        inputs = [
            (torch.randn(batch, opts.hidden, device="cuda", generator=gen).to(dtype),
             torch.randn(batch, opts.hidden, device="cuda", generator=gen).to(dtype), w)
            for _ in range(sets)
        ]
        for name, fn in impls:
            fn(*inputs[0])  # compile / warm up outside the timings
            cold_us, cold_min = time_cold(fn, inputs[0], flush, opts.reps)
            graph_us = time_graph(fn, inputs, opts.graph_calls, opts.graph_replays)
            worst = check(fn, *inputs[0], TOLERANCE[opts.dtype])
            cold_gbps = bytes_moved / (cold_us * 1e3)
            graph_gbps = bytes_moved / (graph_us * 1e3)
            pct = (lambda g: 100 * g / peak) if peak else (lambda g: float("nan"))
            print(f"{name:<14} {batch:>7} {cold_us:>9.2f} {cold_min:>9.2f} {cold_gbps:>8.0f} "
                  f"{pct(cold_gbps):>6.1f} {graph_us:>9.2f} {graph_gbps:>8.0f} "
                  f"{pct(graph_gbps):>6.1f} {sets:>5} {'ok' if worst <= 1 else 'FAIL':>6}")
            results.append({
                "impl": name, "batch": batch, "hidden": opts.hidden, "dtype": opts.dtype,
                "bytes_moved": bytes_moved, "cold_median_us": cold_us, "cold_min_us": cold_min,
                "graph_per_call_us": graph_us, "cold_gbps": cold_gbps, "graph_gbps": graph_gbps,
                "input_sets": sets, "check_ok": worst <= 1,
            })
        del inputs
    if opts.json:
        with open(opts.json, "w") as f:
            json.dump({"device": props.name, "torch": torch.__version__, "peak_gbps": peak,
                       "protocol": protocol, "results": results}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
