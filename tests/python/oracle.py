"""The fp64 reference, computed here with numpy alone: an oracle independent of the server.

    s            = hidden_states + residual
    output       = s / sqrt(mean(s^2) + eps) * weight
    residual_out = s

in float64 from the inputs' exact values. Tolerances are the service's per-dtype rule
|out - ref| <= atol + rtol * |ref| (README.md, "Benchmark protocol").
"""

from __future__ import annotations

from typing import Dict, Tuple

import ml_dtypes
import numpy as np

DTYPES: Dict[str, np.dtype] = {
    "bf16": np.dtype(ml_dtypes.bfloat16),
    "fp16": np.dtype(np.float16),
    "fp32": np.dtype(np.float32),
}
TOLERANCE = {"bf16": 1e-2, "fp16": 2e-3, "fp32": 1e-5}  # atol = rtol


def inputs(
    batch: int, hidden: int, dtype: str, seed: int = 7
) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    t = DTYPES[dtype]
    x = rng.standard_normal((batch, hidden)).astype(t)
    r = rng.standard_normal((batch, hidden)).astype(t)
    w = (1 + 0.1 * rng.standard_normal(hidden)).astype(t)
    return x, r, w


def reference(
    x: np.ndarray, r: np.ndarray, w: np.ndarray, eps: float = 1e-6
) -> Tuple[np.ndarray, np.ndarray]:
    s = x.astype(np.float64) + r.astype(np.float64)
    rms = np.sqrt(np.mean(s * s, axis=-1, keepdims=True) + eps)
    return s / rms * w.astype(np.float64), s


def assert_close(actual: np.ndarray, expected: np.ndarray, dtype: str, what: str) -> None:
    assert actual.shape == expected.shape, f"{what}: shape {actual.shape} != {expected.shape}"
    assert actual.dtype == DTYPES[dtype], f"{what}: dtype {actual.dtype} != {DTYPES[dtype]}"
    a = actual.astype(np.float64)
    tol = TOLERANCE[dtype]
    bad = ~(np.abs(a - expected) <= tol + tol * np.abs(expected))
    assert not bad.any(), (
        f"{what}: {int(bad.sum())} of {bad.size} elements off the fp64 reference; first at "
        f"{np.argwhere(bad)[0].tolist()}: {a[bad][0]} vs {expected[bad][0]}"
    )
