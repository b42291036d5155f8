"""The architecture's contracts: one workaround record with a stage, stages declared once and
labelled in the source, generated README tables, and a core that names no backend."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

import export_core
import export_executorch
import export_onnx
from export_core.registry import (
    DYNAMO_PLAN,
    describe,
    plan_for,
    readme_with_table,
    workaround_table,
)
from export_core.stages import StagePlan

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ROOT / "packages"
UPSTREAM = re.compile(r"^https://github\.com/[\w.-]+/[\w.-]+/(issues|pull)/\d+")
LABEL = re.compile(r"# ── (.+?) ──")

PLANS: dict[str, StagePlan] = {
    "dynamo": DYNAMO_PLAN,
    "onnx": export_onnx.ONNX_STAGES,
    "executorch": export_executorch.EXECUTORCH_STAGES,
}
PART_SOURCES: dict[str, list[Path]] = {
    "cli": [PACKAGES / "export-core/src/export_core/cli.py"],
    "artifact": [PACKAGES / "export-core/src/export_core/exporter.py"],
    "capture": [PACKAGES / "export-core/src/export_core/exporter.py"],
    "onnx": [PACKAGES / "export-onnx/src/export_onnx/exporter.py"],
    "executorch": [PACKAGES / "export-executorch/src/export_executorch/exporter.py"],
}


def test_every_workaround_has_a_stage_of_its_backend_a_reason_and_an_issue_or_pr_link() -> None:
    rows = describe()
    assert {r.backend.split(".")[0] for r in rows} >= {"dynamo", "onnx", "executorch"}
    assert {r.kind for r in rows} >= {"patch", "fx_node_fix", "fx_program_fix", "translation",
                                      "ir_fix"}
    for r in rows:
        plan = plan_for(r.backend)
        assert plan is not None, r
        assert r.stage in plan and r.kind in plan[r.stage].runs, r
        assert r.stage_number == plan[r.stage].number and r.stage_title, r
        assert r.reason.strip(), r
        assert UPSTREAM.match(r.upstream), r


@pytest.mark.parametrize("name", list(PLANS))
def test_every_declared_stage_is_a_labelled_step_in_the_source(name: str) -> None:
    plan = PLANS[name]
    for stage in plan:
        text = "\n".join(p.read_text() for p in PART_SOURCES[stage.part])
        assert text.count(f"# ── {stage.label} ──") == 1, f"{stage.label!r} is not labelled once"


def test_no_source_label_names_an_undeclared_stage() -> None:
    declared = {s.label for plan in PLANS.values() for s in plan}
    for path in PACKAGES.glob("*/src/**/*.py"):
        for label in LABEL.findall(path.read_text()):
            if " stage " in label:
                assert label in declared, f"{path}: label {label!r} is not a declared stage"


def test_report_stages_and_errors_use_the_plan_names(tmp_path: Path) -> None:
    import torch

    result = export_onnx.export(torch.nn.Linear(4, 2).eval(), (torch.randn(3, 4),), output=tmp_path)
    names = [s["name"] for s in result.report["stages"]]
    assert set(names) <= set(export_onnx.ONNX_STAGES.names)
    assert names == [n for n in export_onnx.ONNX_STAGES.names if n in names]  # in plan order
    with pytest.raises(export_core.ExportError) as info:
        export_onnx.export(torch.nn.Linear(4, 2).eval(), (torch.randn(3, 5),), output=tmp_path)
    assert info.value.stage in export_onnx.ONNX_STAGES


@pytest.mark.parametrize("package, backends", [
    ("export-core", ("dynamo",)),
    ("export-onnx", ("onnx",)),
    ("export-executorch", ("executorch",)),
])
def test_readme_workaround_tables_are_generated_from_the_registry(package: str, backends) -> None:
    text = (PACKAGES / package / "README.md").read_text()
    assert readme_with_table(text, backends) == text, (
        f"{package}/README.md is stale: run python -m export_core --backend {' '.join(backends)} "
        f"--readme packages/{package}/README.md"
    )
    assert workaround_table(backends) in text


def test_table_commands_list_every_backend() -> None:
    out = subprocess.run([sys.executable, "-m", "export_core"], capture_output=True, text=True,
                         timeout=600, check=True).stdout
    for key in ("dynamo", "onnx", "executorch", "executorch.xnnpack"):
        assert f"\n{key} " in out
    cli = Path(sys.executable).with_name("export-onnx")
    out = subprocess.run([str(cli), "workarounds"], capture_output=True, text=True, timeout=600,
                         check=True).stdout
    assert "fix_ir_where_dtypes" in out and "bound_dynamic_dims" not in out


def test_the_core_names_no_backend() -> None:
    pattern = re.compile(r"export_onnx|export_executorch|export_sweep")
    for path in (PACKAGES / "export-core/src").rglob("*.py"):
        assert not pattern.search(path.read_text()), f"{path} names a backend"


def test_importing_the_core_loads_no_backend() -> None:
    code = (
        "import sys, export_core\n"
        "import export_core.exporter, export_core.cli, export_core.registry\n"
        "bad = [m for m in sys.modules if m.split('.')[0] in "
        "('export_onnx', 'export_executorch', 'export_sweep', 'onnx', 'onnxruntime', "
        "'onnxscript', 'executorch')]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=300)
