"""Progress a person can follow: off a terminal (a CI log) every stage prints one line with its
seconds and a long stage says it is still running; the report's stage seconds add up to the
export's wall time, from the CLI's imports to the validation."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch
from rich.console import Console

import export_executorch
from export_core.progress import RichStageListener
from export_core.stages import CLI_STAGES
from export_executorch import EXECUTORCH_STAGES
from export_onnx import ONNX_STAGES

STAGE_LINE = re.compile(r"^  ✓ (\w+ \d+/\d+)\s+(\w+)\s+(\d+\.\d\d) s$")


def test_a_long_stage_off_a_terminal_says_it_is_running() -> None:
    out = io.StringIO()
    listener = RichStageListener(Console(file=out, force_terminal=False, width=200),
                                 heartbeat=0.1)
    stage = EXECUTORCH_STAGES["lower"]
    listener.stage_started(stage)
    time.sleep(0.35)
    listener.stage_finished(stage, 0.35, True)
    time.sleep(0.2)  # no line after the stage ended
    lines = out.getvalue().splitlines()
    assert len(lines) >= 3, lines
    assert all(re.fullmatch(r"  … executorch 6/7\s+lower\s+running, \d s", ln) for ln in lines[:-1])
    assert STAGE_LINE.match(lines[-1]), lines[-1]


def test_quiet_prints_no_progress() -> None:
    out = io.StringIO()
    listener = RichStageListener(Console(file=out, force_terminal=False), quiet=True,
                                 heartbeat=0.05)
    listener.stage_started(ONNX_STAGES["translate"])
    time.sleep(0.2)
    listener.stage_finished(ONNX_STAGES["translate"], 0.2, True)
    assert out.getvalue() == ""


def test_api_stage_seconds_add_up_to_the_wall_time() -> None:
    class Lin(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = torch.nn.Linear(4, 3)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.lin(x)

    export = export_executorch.export  # resolving the lazy name imports the package: not timed
    start = time.perf_counter()
    result = export(Lin().eval(), {"x": torch.randn(2, 4)}, max_batch=4)
    wall = time.perf_counter() - start
    total = sum(s["seconds"] for s in result.report["stages"])
    assert abs(wall - total) <= 0.5 + 0.02 * wall, (wall, total, result.report["stages"])


def test_cli_off_a_terminal_one_line_per_stage_and_the_report_adds_up(
    tiny_model_dir: Callable[[str], Path], tmp_path: Path,
) -> None:
    """A fresh process, stderr a pipe (as in CI): the imports of torch, transformers and the
    backend are a stage of their own, so the report accounts for ``main()``'s wall time."""
    out, model = tmp_path / "out", tiny_model_dir("bert")
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    driver = ("import sys, time; from export_onnx.cli import main; start = time.perf_counter(); "
              "rc = main(sys.argv[1:]); print(time.perf_counter() - start); sys.exit(rc)")
    proc = subprocess.run([sys.executable, "-c", driver, str(model), "-o", str(out)],
                          capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stderr
    wall = float(proc.stdout.split()[-1])  # main()'s own: the interpreter's start and exit are not
    printed = [STAGE_LINE.match(ln) for ln in proc.stderr.splitlines() if ln.startswith("  ✓")]
    assert printed and all(printed), proc.stderr
    report = json.loads((out / "export_report.json").read_text())
    names = [s["name"] for s in report["stages"]]
    assert names[:3] == [s.name for s in CLI_STAGES] == ["imports", "load", "inputs"]
    assert [m.group(2) for m in printed] == names  # every stage on stderr, in order, once
    total = sum(s["seconds"] for s in report["stages"])
    assert abs(wall - total) <= 0.5 + 0.02 * wall, (wall, total, report["stages"])
