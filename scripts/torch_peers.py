#!/usr/bin/env python3
"""Peers of the fused residual-add + RMSNorm kernel, measured as kerneleval measures itself.

Peers: PyTorch eager and torch.compile (OUTPUT mode, the project's numerics: s = x + r in
fp32, one rounding at the end), Liger-Kernel's fused_add_rms_norm (Triton; writes output,
residual and a per-row rstd) and FlashInfer's CUDA FusedAddRMSNorm (in place: residual <- s,
input <- output; PDL on), the last two where installed / built.

Protocols, the same for every peer:

  cold-read   L2 flushed before every call by READING 2x the L2 size, outside the window,
              as kerneleval's flush kernel reads it: a grid-stride read by 4 CTAs per SM
              plus one more each call, cycling over the SM count, so that the calls of a
              measurement do not all land their CTAs on the same SMs (a Triton kernel;
              torch's sum over the buffer where Triton is missing, and the output says so).
  cold-write  the same with a WRITE flush (zeroing the buffer, as triton.testing.do_bench).
  graph       --graph-calls calls captured in one torch.cuda.CUDAGraph, events around the
              replay, per-call time = replay / calls; inputs rotate over copies when one
              call's bytes exceed L2/2.

Before every start event the device spins (torch.cuda._sleep, --spin-us) so that the host
has queued the call and the stop event by the time the start event is reached: without it
the events time the host's launch (cold Python numbers were host-bound, 22-91 us).
kerneleval does the same: its hot and graph calls run behind a stream gate kernel, and its
cold calls behind the flush kernel. Median (and min) of --reps samples.

Usage: python3 scripts/torch_peers.py [--batches 1,6,34] [--hidden 2048[,4096,...]] [--json PATH]
       [--flashinfer-lib bundle/gpu/lib/libkerneleval_flashinfer.so]
"""

import argparse
import ctypes
import json
import statistics
import sys

import torch

try:
    import triton
    import triton.language as tl
except Exception:  # no Triton: the read flush falls back to torch's sum
    triton = None

if triton is not None:
    @triton.jit
    def _read_flush_kernel(src, n, sink, BLOCK: tl.constexpr):
        step = tl.num_programs(0) * BLOCK
        acc = tl.zeros([BLOCK], dtype=tl.int32)
        for start in range(tl.program_id(0) * BLOCK, n, step):
            offs = start + tl.arange(0, BLOCK)
            acc += tl.load(src + offs, mask=offs < n, other=0)
        total = tl.sum(acc, axis=0)
        if total == 0x5EED:  # never taken (the buffer holds ones or zeros): keeps the reads
            tl.store(sink, total)


class ReadFlush:
    """kerneleval's cold flush: reads the whole buffer, by a grid one CTA larger each call."""

    def __init__(self, buf, sms):
        self.buf, self.sms, self.calls = buf, sms, 0
        self.words = buf.view(torch.int32)
        self.sink = torch.zeros(1, dtype=torch.int32, device=buf.device)
        self.triton = triton is not None
        self.note = "Triton grid-stride read, 4 CTAs per SM + 0..SMs-1 cycling"
        if self.triton:
            try:
                self()
                torch.cuda.synchronize()
            except Exception as e:  # say so, and fall back
                self.triton = False
                self.note = f"torch sum over the buffer (Triton flush failed: {e})"
        else:
            self.note = "torch sum over the buffer (no Triton)"

    def __call__(self):
        if not self.triton:
            self.buf.sum(dtype=torch.int32)
            return
        grid = 4 * self.sms + self.calls % self.sms
        self.calls += 1
        _read_flush_kernel[(grid,)](self.words, self.words.numel(), self.sink, BLOCK=1024)


DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
TOLERANCE = {"bf16": 1e-2, "fp16": 2e-3, "fp32": 1e-5}
EPS = 1e-6


def fused_add_rmsnorm(x, r, w):
    s = x.float() + r.float()
    return (s * torch.rsqrt(s.pow(2).mean(-1, keepdim=True) + EPS) * w.float()).to(x.dtype)


def fused_add_rmsnorm_with_residual(x, r, w):
    """OUTPUT_AND_RESIDUAL: the output and the rounded sum, as Liger and FlashInfer write."""
    s = x.float() + r.float()
    y = (s * torch.rsqrt(s.pow(2).mean(-1, keepdim=True) + EPS) * w.float()).to(x.dtype)
    return y, s.to(x.dtype)


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


class Peer:
    """A callable on (x, r, w) with what it writes, for bytes and the correctness check."""

    def __init__(self, name, fn, tensors_moved, in_place=False, note=""):
        self.name, self.fn, self.tensors_moved, self.in_place, self.note = (
            name, fn, tensors_moved, in_place, note)


def liger_peer():
    try:
        from liger_kernel.ops.fused_add_rms_norm import fused_add_rms_norm_forward
    except Exception as e:  # not installed: say so in the results
        return None, f"Liger-Kernel unavailable: {e}"

    def fn(x, r, w):
        y, _s, _rstd, *_ = fused_add_rms_norm_forward(x, r, w, EPS, 0.0, "llama")
        return y

    # Reads x, r, w; writes output, residual (S) and an fp32 rstd per row.
    return Peer("liger", fn, 4, note="writes output + residual + rstd"), ""


def flashinfer_peer(lib_path, dtype_name):
    if not lib_path:
        return None, "FlashInfer unavailable: no --flashinfer-lib"
    try:
        lib = ctypes.CDLL(lib_path)
    except OSError as e:
        return None, f"FlashInfer unavailable: {e}"
    try:
        call = getattr(lib, f"kerneleval_flashinfer_fused_add_rmsnorm_{dtype_name}")
    except AttributeError as e:
        return None, f"FlashInfer unavailable for {dtype_name}: {e}"
    call.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint32,
                     ctypes.c_uint32, ctypes.c_float, ctypes.c_int, ctypes.c_void_p]
    call.restype = ctypes.c_int

    def fn(x, r, w):
        err = call(x.data_ptr(), r.data_ptr(), w.data_ptr(), x.shape[0], x.shape[1], EPS, 1,
                   torch.cuda.current_stream().cuda_stream)
        if err != 0:
            raise RuntimeError(f"FlashInfer FusedAddRMSNorm: cudaError {err}")
        return x

    # In place: reads x, r, w; writes x (output) and r (residual).
    return Peer("flashinfer", fn, 4, in_place=True, note="in place, PDL on"), ""


def spin_cycles(spin_us):
    """Cycles of torch.cuda._sleep lasting at least spin_us at any SM clock up to 2 GHz."""
    return int(spin_us * 2000)


def time_cold(peer, args, flush, write_flush, reps, spin, warmup=5):
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    for i in range(-warmup, reps):
        if write_flush:
            flush.buf.zero_()
        else:
            flush()  # reads 2x L2
        torch.cuda._sleep(spin)
        if i >= 0:
            starts[i].record()
        peer.fn(*args)
        if i >= 0:
            ends[i].record()
    torch.cuda.synchronize()
    times = [s.elapsed_time(e) * 1e3 for s, e in zip(starts, ends)]
    return statistics.median(times), min(times)


def time_graph(peer, sets, calls, replays, spin):
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for i in range(3):
            peer.fn(*sets[i % len(sets)])
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    outputs = []
    with torch.cuda.graph(graph):
        for i in range(calls):
            outputs.append(peer.fn(*sets[i % len(sets)]))
    graph.replay()
    graph.replay()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(replays)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(replays)]
    for i in range(replays):
        torch.cuda._sleep(spin)
        starts[i].record()
        graph.replay()
        ends[i].record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) * 1e3 / calls for s, e in zip(starts, ends))


def check(peer, x, r, w, tol):
    """Largest |out - ref| / (tol + tol |ref|) against an fp64 reference (pass: <= 1)."""
    s = x.double() + r.double()
    ref = s * torch.rsqrt(s.pow(2).mean(-1, keepdim=True) + EPS) * w.double()
    xc, rc = x.clone(), r.clone()  # in-place peers overwrite their inputs
    out = peer.fn(xc, rc, w)
    out = (out[0] if isinstance(out, tuple) else out).double()
    err = (out - ref).abs() / (tol + tol * ref.abs())
    return float(err.max()) if torch.isfinite(err).all() else float("inf")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", default="1,6,34,64,79,12383,16254")
    parser.add_argument("--hidden", default="2048", help="one hidden size or a comma list")
    parser.add_argument("--dtype", choices=sorted(DTYPES), default="bf16")
    parser.add_argument("--reps", type=int, default=100)
    parser.add_argument("--graph-calls", type=int, default=50)
    parser.add_argument("--graph-replays", type=int, default=50)
    parser.add_argument("--spin-us", type=float, default=200.0,
                        help="device spin before every start event, microseconds")
    parser.add_argument("--no-compile", action="store_true", help="no torch.compile peer")
    parser.add_argument("--no-eager", action="store_true", help="no torch eager peer")
    parser.add_argument("--with-residual", action="store_true",
                        help="torch peers also write the residual (4 tensors, as Liger and "
                             "FlashInfer); inputs rotate by 4 tensors' bytes")
    parser.add_argument("--flashinfer-lib", help="libkerneleval_flashinfer.so (gpu-bundle.sh)")
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
    spin = spin_cycles(opts.spin_us)
    protocol = (
        f"timer: CUDA events (torch.cuda.Event), each start event behind a {opts.spin_us:.0f} us "
        f"device spin (torch.cuda._sleep). cold-read: L2 flushed before each call by reading "
        f"{2 * l2 / 2**20:.0f} MiB (2x L2, as kerneleval's flush kernel); cold-write: by zeroing "
        f"it; events around one call, median (and min) of {opts.reps} after 5 warm-ups. graph: "
        f"{opts.graph_calls} calls in one torch.cuda.CUDAGraph, events around the replay, median "
        f"per-call time over {opts.graph_replays} replays; inputs rotated over copies when one "
        f"call's bytes exceed L2/2. Inputs hot in graph replay where they fit in L2."
    )
    print(f"device: {props.name}, {props.multi_processor_count} SMs, L2 {l2 / 2**20:.1f} MiB, "
          f"attribute peak {peak:.1f} GB/s" if peak else f"device: {props.name} (no NVML peak)")
    hiddens = [int(h) for h in opts.hidden.split(",")]
    print(f"torch {torch.__version__}; op: {opts.dtype} hidden {opts.hidden}, eps {EPS}")
    # One compiled graph per (batch, hidden): lift dynamo's recompile limit (8 by default),
    # past which torch.compile would silently run eager.
    from torch import _dynamo
    for knob in ("cache_size_limit", "recompile_limit"):
        if hasattr(_dynamo.config, knob):
            setattr(_dynamo.config, knob, 4096)
    print(protocol)

    torch_fn, torch_tensors = fused_add_rmsnorm, 3
    if opts.with_residual:
        torch_fn, torch_tensors = fused_add_rmsnorm_with_residual, 4
    peers = [] if opts.no_eager else [Peer("torch-eager", torch_fn, torch_tensors)]
    if not opts.no_compile:
        peers.append(Peer("torch-compile", torch.compile(torch_fn, dynamic=False),
                          torch_tensors))
    notes = []
    for make in (liger_peer, lambda: flashinfer_peer(opts.flashinfer_lib, opts.dtype)):
        peer, why = make()
        if peer is not None:
            peers.append(peer)
        elif why:
            notes.append(why)
    for n in notes:
        print(n)

    flush_buf = torch.empty(2 * l2, dtype=torch.int8, device="cuda")
    flush_buf.fill_(1)
    flush = ReadFlush(flush_buf, props.multi_processor_count)
    print(f"cold-read flush: {flush.note}")
    gen = torch.Generator(device="cuda").manual_seed(0)
    results = []
    print(f"\n{'impl':<14} {'hidden':>6} {'batch':>7} {'cold_rd':>9} {'min':>8} {'cold_wr':>9} "
          f"{'GB/s':>7} {'%peak':>6} {'graph':>9} {'GB/s':>7} {'%peak':>6} {'sets':>5} {'check':>6}")
    shapes = [(h, int(b)) for h in hiddens for b in opts.batches.split(",")]
    w = None
    for hidden, batch in shapes:
        if w is None or w.shape[0] != hidden:
            w = torch.randn(hidden, device="cuda", generator=gen).to(dtype)
        one_call = (torch_tensors * batch * hidden + hidden) * elem
        sets = 1
        if one_call > l2 // 2:
            sets = min(max(2, 3 * l2 // one_call + 1), opts.graph_calls)
        inputs = [
            (torch.randn(batch, hidden, device="cuda", generator=gen).to(dtype),
             torch.randn(batch, hidden, device="cuda", generator=gen).to(dtype), w)
            for _ in range(sets)
        ]
        for peer in peers:
            # Bytes each peer moves by its own API (declared tensors once; rstd ignored).
            moved = (peer.tensors_moved * batch * hidden + hidden) * elem
            worst = check(peer, *inputs[0], TOLERANCE[opts.dtype])
            peer.fn(*inputs[0])  # compile / warm up outside the timings
            cold_rd, cold_min = time_cold(peer, inputs[0], flush, False, opts.reps, spin)
            cold_wr, _ = time_cold(peer, inputs[0], flush, True, opts.reps, spin)
            graph_us = time_graph(peer, inputs, opts.graph_calls, opts.graph_replays, spin)
            cold_gbps = moved / (cold_rd * 1e3)
            graph_gbps = moved / (graph_us * 1e3)
            pct = (lambda g: 100 * g / peak) if peak else (lambda g: float("nan"))
            print(f"{peer.name:<14} {hidden:>6} {batch:>7} {cold_rd:>9.2f} {cold_min:>8.2f} "
                  f"{cold_wr:>9.2f} {cold_gbps:>7.0f} {pct(cold_gbps):>6.1f} {graph_us:>9.2f} {graph_gbps:>7.0f} "
                  f"{pct(graph_gbps):>6.1f} {sets:>5} {'ok' if worst <= 1 else 'FAIL':>6}")
            results.append({
                "impl": peer.name, "note": peer.note, "batch": batch, "hidden": hidden,
                "dtype": opts.dtype, "bytes_moved": moved, "cold_read_flush_median_us": cold_rd,
                "cold_read_flush_min_us": cold_min, "cold_write_flush_median_us": cold_wr,
                "graph_per_call_us": graph_us, "cold_gbps": cold_gbps, "graph_gbps": graph_gbps,
                "input_sets": sets, "check_ok": worst <= 1,
            })
        del inputs
    if opts.json:
        with open(opts.json, "w") as f:
            json.dump({"device": props.name, "torch": torch.__version__, "peak_gbps": peak,
                       "protocol": protocol, "unavailable": notes, "results": results}, f,
                      indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
