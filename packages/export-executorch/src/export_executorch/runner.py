"""Running an ExecuTorch program in ``executorch.runtime`` on one input set."""

from __future__ import annotations

import contextlib
import io
import logging
import re
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import torch

from export_core.errors import RuntimeLoadError
from export_core.exporter import flat_feed

__all__ = ["ExecutorchRunner", "NativeLog", "load_error_reason", "native_log", "registered_backends"]

logger = logging.getLogger(__name__)

_LOG_LOCK = threading.RLock()
"""``sys.stderr`` is process-global: one capture at a time, so threads cannot strand it."""

_ERROR_NAMES = {
    0x01: "Internal", 0x02: "InvalidState", 0x10: "NotSupported", 0x11: "NotImplemented",
    0x12: "InvalidArgument", 0x13: "InvalidType", 0x14: "OperatorMissing", 0x20: "NotFound",
    0x21: "MemoryAllocationFailed", 0x22: "AccessFailed", 0x23: "InvalidProgram",
    0x30: "DelegateInvalidCompatibility", 0x31: "DelegateMemoryAllocationFailed",
}
"""ExecuTorch's ``runtime::Error`` codes (``runtime/core/error.h``) that loading a method returns."""

_LOAD_HINTS = {
    "OperatorMissing": "a kernel the program calls is not in this runtime",
    "MemoryAllocationFailed": "the runtime could not allocate the method's memory (its planned "
    "arena, sized by the dynamic-shape bounds, or its values)",
    "DelegateMemoryAllocationFailed": "a delegate could not allocate its memory",
    "InvalidProgram": "the program is malformed or uses an unsupported feature",
}


def load_error_reason(message: str) -> str:
    """What a ``load_method`` failure means, from the error code in its message
    (``"Failed to load method forward, error: 0x:21"`` ->
    ``"MemoryAllocationFailed: the runtime could not allocate the method's memory ..."``);
    ``"missing kernel or unsupported op?"`` when the message names no known code."""
    match = re.search(r"error:?\s*0x:?([0-9a-fA-F]+)", message)
    name = _ERROR_NAMES.get(int(match.group(1), 16)) if match else None
    if name is None:
        return "missing kernel or unsupported op?"
    hint = _LOAD_HINTS.get(name)
    return f"{name}: {hint}" if hint else name


_NATIVE_HINTS = ("Attempted", "Check failed", "out of bounds", "Missing", "not found", "Error")


class NativeLog:
    """What the ExecuTorch C++ runtime wrote to stderr inside a :func:`native_log` block."""

    text: str = ""

    def reason(self) -> str:
        """The most telling native line (a failed check, a resize beyond its bound), or ``""``."""
        lines = [ln.strip() for ln in self.text.splitlines() if ln.strip()]
        for hint in _NATIVE_HINTS:
            for ln in lines:
                if hint in ln:
                    return ln.split("] ", 1)[-1]
        return ""


@contextlib.contextmanager
def native_log() -> Iterator[NativeLog]:
    """Capture what the ExecuTorch runtime logs while it loads or runs a program.

    The runtime's C++ log (CPU probing, the failed check behind an ``0x12``) reaches Python's
    ``sys.stderr`` through the pybindings; the command line promises one line on failure, so the
    log is kept (at debug level) and its telling line goes into the error message instead.
    Captures are serialized across threads (the runtime calls inside run one at a time).
    """
    log = NativeLog()
    sink = io.StringIO()
    try:
        with _LOG_LOCK, contextlib.redirect_stderr(sink):
            yield log
    finally:
        log.text = sink.getvalue()
        if log.text:
            logger.debug("ExecuTorch runtime log:\n%s", log.text)


def _input_bounds(method: Any) -> list[tuple[int, ...] | None]:
    """The planned (upper-bound) sizes of each input of a loaded method, ``None`` for an input
    that is no tensor or whose metadata the runtime does not give."""
    bounds: list[tuple[int, ...] | None] = []
    try:
        meta = method.metadata
        count = meta.num_inputs()
    except Exception:  # noqa: BLE001 - an older runtime without method metadata: no check
        return bounds
    for i in range(count):
        try:
            bounds.append(tuple(int(s) for s in meta.input_tensor_meta(i).sizes()))
        except Exception:  # noqa: BLE001 - not a tensor input
            bounds.append(None)
    return bounds


def registered_backends() -> list[str]:
    """Delegate backends compiled into the installed ExecuTorch runtime (``XnnpackBackend``, ...)."""
    from executorch.runtime import Runtime

    return list(Runtime.get().backend_registry.registered_backend_names)


def _why(log: NativeLog) -> str:
    reason = log.reason()
    return f" ({reason})" if reason else ""


def _first_line(e: BaseException) -> str:
    return next((ln.strip() for ln in str(e).splitlines() if ln.strip()), type(e).__name__)


class ExecutorchRunner:
    """An ExecuTorch ``forward`` method that takes the same input sets as the eager model.

    The :class:`~executorch.runtime.Program` stays referenced by the runner for as long as its
    method runs: when only the method is kept, the program is collected and later ``execute``
    calls can crash.

    Args:
        program: a ``.pte`` path or the serialized program bytes.
        order: keys of the export input dict, in traced order (to flatten dict input sets).
        dtype: floating dtype the program expects; float inputs are cast to it.
        data_path: the ``.ptd`` file with the program's external data (CUDA weights), if any.
        runtime_backend: delegate the program needs (``"XnnpackBackend"``); checked up front
            so a runtime without it fails with a clear message.
        keepalive: an object kept as long as the runner (the temporary directory holding
            ``data_path``).

    Raises:
        RuntimeLoadError: the runtime lacks the delegate, or cannot load the program or its
            ``forward`` method (missing kernel, unsupported op, arena too large).
    """

    def __init__(
        self,
        program: str | Path | bytes,
        order: Sequence[str] = (),
        *,
        dtype: torch.dtype = torch.float32,
        data_path: str | Path | None = None,
        runtime_backend: str | None = None,
        keepalive: Any = None,
    ) -> None:
        self.keepalive = keepalive
        try:
            from executorch.runtime import Runtime
        except ImportError as e:  # pragma: no cover - executorch is a dependency
            raise RuntimeLoadError(f"executorch.runtime cannot be imported: {e}") from e
        runtime = Runtime.get()
        if runtime_backend is not None and not runtime.backend_registry.is_available(runtime_backend):
            have = ", ".join(runtime.backend_registry.registered_backend_names) or "none"
            raise RuntimeLoadError(
                f"the installed ExecuTorch runtime has no {runtime_backend} "
                f"(registered backends: {have}); install an ExecuTorch build with it"
            )
        error: Exception | None = None
        with native_log() as log:
            try:
                self.program = runtime.load_program(
                    program if isinstance(program, bytes) else Path(program), data_path=data_path
                )
            except Exception as e:
                error = e
        if error is not None:
            raise RuntimeLoadError(
                f"ExecuTorch cannot load the program: {_first_line(error)}{_why(log)}"
            ) from error
        with native_log() as log:
            try:
                method = self.program.load_method("forward")
            except Exception as e:
                error = e
        if error is not None:
            raise RuntimeLoadError(
                f"ExecuTorch cannot load method forward ({load_error_reason(str(error))}): "
                f"{_first_line(error)}{_why(log)}"
            ) from error
        if method is None:
            raise RuntimeLoadError("the program has no method forward")
        self.method = method
        self.order = list(order)
        self.dtype = dtype
        self.input_bounds = _input_bounds(method)

    def _feed(self, inputs: dict[str, Any] | tuple[Any, ...]) -> list[Any]:
        feed = []
        for leaf in flat_feed(inputs, self.order):
            if isinstance(leaf, torch.Tensor):
                leaf = leaf.detach().cpu()
                if leaf.is_floating_point() and leaf.dtype != self.dtype:
                    leaf = leaf.to(self.dtype)
                leaf = leaf.contiguous()
            feed.append(leaf)
        return feed

    def _check_bounds(self, feed: list[Any]) -> None:
        """Refuse a tensor whose size on some axis exceeds the program's planned bound.

        ExecuTorch checks only a bounded tensor's element count against its capacity, so an
        input longer than its axis's bound but small enough overall runs, through a graph that
        may be specialised to the bound (a model whose code branches on a size).

        Raises:
            RuntimeLoadError: an input's size on some axis exceeds its bound.
        """
        for i, (leaf, bound) in enumerate(zip(feed, self.input_bounds, strict=False)):
            if not isinstance(leaf, torch.Tensor) or bound is None or leaf.dim() != len(bound):
                continue
            over = [axis for axis, (size, cap) in enumerate(zip(leaf.shape, bound, strict=True))
                    if size > cap]
            if over:
                name = self.order[i] if len(self.order) == len(feed) else f"#{i}"
                axes = ", ".join(f"axis {a}: {leaf.shape[a]} > {bound[a]}" for a in over)
                raise RuntimeLoadError(
                    f"input {name} has shape {tuple(leaf.shape)}, beyond the program's bounds "
                    f"{tuple(bound)} ({axes}); export again with a larger bound (the report's "
                    "bounds say where each came from)"
                )

    def __call__(self, inputs: dict[str, Any] | tuple[Any, ...]) -> list[Any]:
        """Run ``forward`` on one input set (a dict like the export inputs, or a tuple).

        Returns:
            The output leaves in flatten order, as CPU tensors (bfloat16 outputs as float32).
            Leaves that are not tensors (``None`` in a ``ModelOutput`` tuple field a layer
            leaves unset, Python ints such as MaskFormer-Swin's spatial dimensions) are
            dropped, as :func:`export_core.validation.eager_leaves` drops them.

        Raises:
            RuntimeLoadError: ``execute`` failed (an input beyond its planned bound, a kernel
                error).
        """
        feed = self._feed(inputs)
        self._check_bounds(feed)
        error: Exception | None = None
        with native_log() as log:
            try:
                outputs = self.method.execute(feed)
            except Exception as e:
                error = e
        if error is not None:
            shapes = [tuple(t.shape) for t in feed if isinstance(t, torch.Tensor)]
            raise RuntimeLoadError(
                f"ExecuTorch failed to run forward at input shapes {shapes}: "
                f"{_first_line(error)}{_why(log)}"
            ) from error
        out = []
        for o in outputs:
            if not isinstance(o, torch.Tensor):
                continue
            o = o.detach().cpu()
            out.append(o.float() if o.dtype == torch.bfloat16 else o)
        return out
