"""SIGINT and SIGTERM through the installed commands, at several moments of an export: one line
on stderr, exit 130 / 143, no traceback, no temporary file or staging directory, and the earlier
artifact and report in the output directory untouched."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from export_core.output import LOCK_NAME, STAGING_PREFIX


def _earlier_export(out: Path, artifact: str) -> dict[str, bytes]:
    """An output directory holding an earlier successful export."""
    out.mkdir(parents=True)
    (out / artifact).write_bytes(b"the earlier artifact")
    (out / "export_report.json").write_text(json.dumps({"status": "ok", "files": [artifact]}))
    return {p.name: p.read_bytes() for p in out.iterdir()}


def _interrupt(command: list[str], after: str, signum: int, timeout: float = 600) -> tuple[int, str]:
    """Run ``command``, send ``signum`` once a stderr line matches ``after``; returns the exit
    code and the whole stderr."""
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    deadline = time.monotonic() + timeout
    try:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.append(line)
            if re.search(after, line):
                proc.send_signal(signum)
                break
            assert time.monotonic() < deadline, "".join(lines)
        else:
            pytest.fail(f"{after!r} never appeared; stderr:\n{''.join(lines)}")
        rest, _ = proc.communicate(timeout=timeout)[::-1]
        lines.append(rest)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return proc.returncode, "".join(lines)


def _tool(name: str) -> str:
    return str(Path(sys.executable).with_name(name))


def _check(out: Path, before: dict[str, bytes], rc: int, err: str, signum: int, prog: str) -> None:
    assert rc == 128 + signum, err
    assert "Traceback" not in err, err
    last = [ln for ln in err.splitlines() if ln.strip()][-1]
    assert last == f"{prog}: interrupted by {signal.Signals(signum).name}", err
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert not [p for p in out.iterdir() if p.name.startswith((STAGING_PREFIX, LOCK_NAME, "."))]


@pytest.mark.parametrize(
    ("after", "signum"),
    [
        (r"^export-onnx: ", signal.SIGTERM),  # the first line: torch is being imported
        (r"\d+/\d+\s+capture\b", signal.SIGINT),  # capture done: translating
    ],
    ids=["sigterm-at-startup", "sigint-after-capture"],
)
def test_onnx_export_interrupted(after: str, signum: int, tiny_model_dir: Callable[[str], Path],
                                 tmp_path: Path) -> None:
    out = tmp_path / "out"
    before = _earlier_export(out, "model.onnx")
    rc, err = _interrupt([_tool("export-onnx"), str(tiny_model_dir("bert")), "-o", str(out)],
                         after, signum)
    _check(out, before, rc, err, signum, "export-onnx")


def test_executorch_export_terminated_while_lowering(tiny_model_dir: Callable[[str], Path],
                                                     tmp_path: Path) -> None:
    out = tmp_path / "out"
    before = _earlier_export(out, "model.pte")
    rc, err = _interrupt([_tool("export-executorch"), str(tiny_model_dir("bert")), "-o", str(out)],
                         r"\d+/\d+\s+fx_node_fixes\b", signal.SIGTERM)
    _check(out, before, rc, err, signal.SIGTERM, "export-executorch")
