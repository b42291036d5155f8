"""Worker subprocess of :mod:`export_sweep.zoo.isolate` (internal).

Run as ``python -m export_sweep.zoo._worker JOB_FD RESULT_FD PRELOAD``: reads pickled jobs from
``JOB_FD``, runs each under an ``RLIMIT_AS`` cap, writes pickled results to ``RESULT_FD``. A
``None`` job ends the loop.
"""

from __future__ import annotations

import gc
import importlib
import resource
import sys
import time
import traceback
from typing import Any

from export_sweep.errors import first_line

__all__ = ["main"]


def _vm_kib(field: str) -> int | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def _reset_peak() -> None:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass


def _resolve(target: str) -> Any:
    module, _, qual = target.partition(":")
    obj: Any = importlib.import_module(module)
    for part in qual.split("."):
        obj = getattr(obj, part)
    return obj


def _is_oom(e: BaseException) -> bool:
    if isinstance(e, MemoryError):
        return True
    text = str(e).lower()
    return (
        "can't allocate memory" in text
        or "cannot allocate memory" in text
        or ("defaultcpuallocator" in text)
    )



def _run(job: dict[str, Any]) -> dict[str, Any]:
    from export_sweep.zoo.isolate import _send  # noqa: F401 - same framing

    memory_mb = int(job.get("memory_mb") or 0)
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    base = _vm_kib("VmSize")
    if memory_mb and base:
        limit = base * 1024 + memory_mb * 1024 * 1024
        if hard != resource.RLIM_INFINITY:
            limit = min(limit, hard)
        resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    _reset_peak()
    start = time.monotonic()
    out: dict[str, Any]
    try:
        value = _resolve(job["target"])(*job.get("args", ()), **job.get("kwargs", {}))
        out = {"status": "ok", "value": value}
    except BaseException as e:  # noqa: BLE001 - report everything, including SystemExit
        status = "oom" if _is_oom(e) else "fail"
        out = {
            "status": status,
            "error": first_line(e, 500),
            "error_type": type(e).__name__,
            "traceback": traceback.format_exc()[-8000:],
        }
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
    out["seconds"] = time.monotonic() - start
    hwm = _vm_kib("VmHWM")
    out["peak_rss_mb"] = hwm / 1024 if hwm else None
    return out


def main(argv: list[str]) -> int:
    """Worker loop; see the module docstring."""
    from export_sweep.zoo.isolate import _recv, _send

    job_fd, res_fd = int(argv[0]), int(argv[1])
    preload = [m for m in (argv[2] if len(argv) > 2 else "").split(",") if m]
    for name in preload:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - the job will report the import error
            pass
    try:
        import torch

        torch.set_num_threads(1)
    except Exception:  # noqa: BLE001
        pass
    while True:
        try:
            job = _recv(job_fd, None)
        except EOFError:
            return 0
        if job is None:
            return 0
        _send(res_fd, {"kind": "started"})
        result = _run(job)
        try:
            _send(res_fd, result)
        except Exception as e:  # noqa: BLE001 - unpicklable value
            result = {
                "status": "fail",
                "error": f"unpicklable result: {first_line(e, 500)}",
                "error_type": type(e).__name__,
                "seconds": result.get("seconds", 0.0),
                "peak_rss_mb": result.get("peak_rss_mb"),
            }
            _send(res_fd, result)
        gc.collect()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
