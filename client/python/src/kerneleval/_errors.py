"""The one exception the client raises for a failed call."""

from __future__ import annotations

from typing import Any, Optional

import grpc


class KernelEvalError(Exception):
    """A call the server (or the channel) refused or failed.

    Attributes:
        code: the gRPC status code, e.g. ``grpc.StatusCode.INVALID_ARGUMENT``.
        details: the server's message; for INVALID_ARGUMENT it starts with the field it is
            about, e.g. ``"residual.shape: [3, 7] does not match hidden_states.shape [3, 8]"``.
            For a submission that did not compile, the whole NVRTC log follows it.
        diagnostics: for a submission that did not compile, the compiler's
            kerneleval.v1.CompileDiagnostics (log, options, arch); None otherwise.
    """

    def __init__(
        self, code: grpc.StatusCode, details: str, diagnostics: Optional[Any] = None
    ) -> None:
        super().__init__(f"{code.name}: {details}")
        self.code = code
        self.details = details
        self.diagnostics = diagnostics

    @classmethod
    def from_rpc_error(cls, error: grpc.RpcError) -> "KernelEvalError":
        code = error.code() if hasattr(error, "code") else grpc.StatusCode.UNKNOWN
        details = error.details() if hasattr(error, "details") else str(error)
        return cls(code or grpc.StatusCode.UNKNOWN, details or "")


def status_code(number: int) -> grpc.StatusCode:
    """The grpc.StatusCode of a status number carried in a message body (UNKNOWN if none)."""
    for code in grpc.StatusCode:
        if code.value[0] == number:
            return code
    return grpc.StatusCode.UNKNOWN
