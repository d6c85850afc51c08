"""The one exception the client raises for a failed call."""

from __future__ import annotations

import grpc


class KernelEvalError(Exception):
    """A call the server (or the channel) refused or failed.

    Attributes:
        code: the gRPC status code, e.g. ``grpc.StatusCode.INVALID_ARGUMENT``.
        details: the server's message; for INVALID_ARGUMENT it starts with the field it is
            about, e.g. ``"residual.shape: [3, 7] does not match hidden_states.shape [3, 8]"``.
    """

    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        super().__init__(f"{code.name}: {details}")
        self.code = code
        self.details = details

    @classmethod
    def from_rpc_error(cls, error: grpc.RpcError) -> "KernelEvalError":
        code = error.code() if hasattr(error, "code") else grpc.StatusCode.UNKNOWN
        details = error.details() if hasattr(error, "details") else str(error)
        return cls(code or grpc.StatusCode.UNKNOWN, details or "")
