"""The committed COVERAGE.md: complete, measured with the installed versions, and still true.

The last test runs the CI subset of the export sweep (both backends, isolated workers) and fails
when any status differs from the committed table: a model that starts failing, or one that starts
passing without COVERAGE.md being regenerated (``export-sweep coverage``).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from export_sweep.results import versions
from export_sweep.sweep.backends import ALL_BACKENDS, BACKENDS
from export_sweep.sweep.coverage import parse_coverage, parse_generation, parse_versions
from export_sweep.sweep.generate import generative_types
from export_sweep.sweep.job import MIN_VALIDATED_SHAPES
from export_sweep.sweep.run import STATUSES
from export_sweep.sweep.subsets import SUBSETS
from export_sweep.zoo.catalog import base_model_types

ROOT = Path(__file__).resolve().parents[2]
COVERAGE = ROOT / "COVERAGE.md"
EXPORT_RESULTS = (ROOT / "coverage" / "sweep-results.json", ROOT / "coverage" / "portable-results.json")


def test_coverage_lists_every_base_model_type_on_every_backend() -> None:
    """Every type has the default backends; a further column (portable kernels) is complete."""
    table = parse_coverage(COVERAGE.read_text())
    assert set(table) == set(base_model_types())
    columns = {b for row in table.values() for b in row}
    assert set(BACKENDS) <= columns <= set(ALL_BACKENDS)
    for model_type, row in table.items():
        assert set(row) == columns, model_type
        assert set(row.values()) <= set(STATUSES), (model_type, row)


def test_coverage_was_measured_with_the_installed_versions() -> None:
    assert parse_versions(COVERAGE.read_text()) == versions()


def _not_yet_measured(text: str) -> set[str]:
    _, _, tail = text.partition("## Not yet measured")
    return set(re.findall(r"`([^`]+)`", tail))


def test_every_measured_type_has_both_backends() -> None:
    text = COVERAGE.read_text()
    table = parse_coverage(text)
    pending = _not_yet_measured(text)
    measured = set(table) - pending
    assert len(measured) >= 200
    assert measured | pending == set(base_model_types())
    for model_type in measured:
        row = table[model_type]
        assert set(BACKENDS) <= set(row) <= set(ALL_BACKENDS), model_type
        assert set(row.values()) <= set(STATUSES), (model_type, row)


def test_every_recorded_pass_was_validated_at_two_shapes() -> None:
    """A pass in the export results behind COVERAGE.md says how many input sets were compared
    with eager, and it is at least two (records from before the count existed are re-measured)."""
    unverified = {}
    for path in EXPORT_RESULTS:
        for model_type, record in json.loads(path.read_text())["results"].items():
            for backend, result in record.get("backends", {}).items():
                if result["status"] in ("pass", "xpass") and (
                        result.get("validated_shapes", 0) < MIN_VALIDATED_SHAPES):
                    unverified[f"{model_type}/{backend}"] = result.get("validated_shapes")
    assert not unverified, unverified


def test_generation_section_covers_every_generative_type() -> None:
    """Every base type with a generative head has an ONNX generation status; the generation
    families (the ``generate`` subset) have one on every backend."""
    table = parse_generation(COVERAGE.read_text())
    assert set(table) == set(generative_types(base_model_types()))
    for model_type, row in table.items():
        assert "onnx" in row and set(row.values()) <= set(STATUSES), (model_type, row)
    for model_type in SUBSETS["generate"]:
        assert set(table[model_type]) == set(BACKENDS), model_type
        assert set(table[model_type].values()) == {"pass"}, (model_type, table[model_type])


def test_ci_subset_covers_built_and_failing_types() -> None:
    table = parse_coverage(COVERAGE.read_text())
    ci = SUBSETS["ci"]
    assert len(ci) >= 40
    statuses = {table[t][b] for t in ci for b in BACKENDS}
    assert {"pass", "fail"} <= statuses


def test_ci_subset_agrees_with_committed_coverage(tmp_path: Path) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "export_sweep",
            "check",
            str(COVERAGE),
            "--subset",
            "ci",
            "-j",
            "2",
            "--quiet",
            "--out",
            str(tmp_path / "ci-results.json"),
        ],
        capture_output=True,
        text=True,
        timeout=40 * 60,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr[-4000:]
    assert "agree" in proc.stdout
