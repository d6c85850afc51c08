"""numpy arrays and torch tensors <-> the wire's Tensor (raw little-endian row-major bytes).

bf16 is ``ml_dtypes.bfloat16`` in numpy and ``torch.bfloat16`` in torch; fp16 and fp32 are
the native types of both. torch is optional: it is imported only when a tensor is passed.
"""

from __future__ import annotations

from typing import Any, Union

import ml_dtypes
import numpy as np

from kerneleval.v1 import kerneleval_pb2 as pb

ArrayLike = Union[np.ndarray, Any]  # a numpy array or a torch.Tensor

_NUMPY_DTYPES = {
    pb.DTYPE_BF16: np.dtype(ml_dtypes.bfloat16),
    pb.DTYPE_FP16: np.dtype("<f2"),
    pb.DTYPE_FP32: np.dtype("<f4"),
}


def is_torch(value: Any) -> bool:
    """True for a torch.Tensor, without importing torch when it is not loaded."""
    return type(value).__module__.startswith("torch") and hasattr(value, "detach")


def _wire_dtype(array: np.ndarray, name: str) -> pb.DType:
    for wire, dtype in _NUMPY_DTYPES.items():
        if array.dtype == dtype or (
            array.dtype.kind == "f" and array.dtype.newbyteorder("<") == dtype
        ):
            return wire
    raise TypeError(
        f"{name}: dtype {array.dtype} is not one of bfloat16 (ml_dtypes), float16, float32"
    )


def _torch_to_numpy(tensor: Any) -> np.ndarray:
    import torch

    t = tensor.detach().to("cpu").contiguous()
    if t.dtype == torch.bfloat16:
        # numpy has no bf16: the same 16 bits, reinterpreted.
        return t.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    return t.numpy()


def to_proto(value: ArrayLike, name: str) -> pb.Tensor:
    """Encodes one input; `name` is used in error messages ("hidden_states")."""
    array = _torch_to_numpy(value) if is_torch(value) else np.asarray(value)
    dtype = _wire_dtype(array, name)
    array = np.ascontiguousarray(array, dtype=_NUMPY_DTYPES[dtype])
    return pb.Tensor(dtype=dtype, shape=list(array.shape), data=array.tobytes())


def to_numpy(tensor: pb.Tensor) -> np.ndarray:
    """Decodes a response tensor into a new numpy array (bf16 as ml_dtypes.bfloat16)."""
    dtype = _NUMPY_DTYPES.get(tensor.dtype)
    if dtype is None:
        raise ValueError(f"response tensor has unknown dtype {tensor.dtype}")
    return np.frombuffer(tensor.data, dtype=dtype).reshape(tuple(tensor.shape)).copy()


def like(template: ArrayLike, array: np.ndarray) -> ArrayLike:
    """`array` as the caller's type: a torch tensor on `template`'s device, else numpy."""
    if not is_torch(template):
        return array
    import torch

    if array.dtype == np.dtype(ml_dtypes.bfloat16):
        out = torch.from_numpy(array.view(np.int16)).view(torch.bfloat16)
    else:
        out = torch.from_numpy(array)
    return out.to(template.device)
