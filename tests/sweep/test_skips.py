"""Skip lists of the export sweep: record schema, and every entry as a strict expected failure.

An entry of ``EXPORT_SKIPS`` or ``ONNX_DISABLE_OPTIMIZE`` that starts exporting fails this suite
(``xfail(strict=True)``) until it is removed: the lists can only shrink.
"""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from export_sweep.sweep.job import export_backend  # noqa: E402
from export_sweep.sweep.skips import (  # noqa: E402
    EXPORT_SKIPS,
    ONNX_DISABLE_OPTIMIZE,
    SkipEntry,
    applicable_skip,
    disable_optimize,
    validate_entries,
)

_SYNTHETIC = SkipEntry(
    model_type="bert",
    class_name="BertModel",
    scope="onnx",
    reason="[translate] aten::foo has no ONNX translation (synthetic record for the schema test)",
    fix="https://github.com/pytorch/pytorch/issues/1",
)


def test_skip_lists_are_valid() -> None:
    assert validate_entries(EXPORT_SKIPS) == []
    assert validate_entries(ONNX_DISABLE_OPTIMIZE, require_url=True) == []


def test_record_schema_accepts_a_complete_record() -> None:
    assert validate_entries([_SYNTHETIC], require_url=True) == []


@pytest.mark.parametrize(
    ("changes", "problem"),
    [
        ({"class_name": ""}, "required"),
        ({"scope": "tflite"}, "scope must be one of"),
        ({"reason": "broken"}, "reason must explain"),
        ({"fix": " "}, "fix (model-side change or bug URL) is required"),
        ({"fix": "rewrite the loop"}, "fix must be the upstream bug URL"),
    ],
)
def test_record_schema_rejects_incomplete_records(changes: dict, problem: str) -> None:
    bad = SkipEntry(**{**_SYNTHETIC.__dict__, **changes})
    problems = validate_entries([bad], require_url=True)
    assert any(problem in p for p in problems), problems


def test_duplicate_records_are_rejected() -> None:
    assert any("duplicate" in p for p in validate_entries([_SYNTHETIC, _SYNTHETIC]))


def test_scopes_select_backends() -> None:
    entries = [_SYNTHETIC]
    assert applicable_skip("BertModel", "onnx", entries=entries) is _SYNTHETIC
    assert applicable_skip("BertModel", "executorch", entries=entries) is None
    assert applicable_skip("ViTModel", "onnx", entries=entries) is None
    dyn = SkipEntry(**{**_SYNTHETIC.__dict__, "scope": "dynamic"})
    assert applicable_skip("BertModel", "executorch", entries=[dyn]) is dyn
    assert applicable_skip("BertModel", "executorch", dynamic=False, entries=[dyn]) is None
    every = SkipEntry(**{**_SYNTHETIC.__dict__, "scope": "all"})
    assert applicable_skip("BertModel", "executorch", entries=[every]) is every
    assert disable_optimize("BertModel", entries) and not disable_optimize("ViTModel", entries)


def _export(entry: SkipEntry, backend: str) -> dict:
    from export_sweep.zoo import build_tiny_model

    tiny = build_tiny_model(entry.model_type)
    assert tiny.class_name == entry.class_name, "the zoo builds another class for this type"
    # No skip lists: the plain export must fail for the entry to stay listed.
    return export_backend(tiny.model, tiny.inputs, backend, class_name=tiny.class_name, skips=())


def _params(entries: tuple[SkipEntry, ...]) -> list:
    return [
        pytest.param(
            e, marks=pytest.mark.xfail(strict=True, reason=e.reason), id=f"{e.class_name}-{e.scope}"
        )
        for e in entries
    ]


# Parametrized only over entries that exist: an empty parameter set would be reported as skipped.
if EXPORT_SKIPS:

    @pytest.mark.slow
    @pytest.mark.parametrize("entry", _params(EXPORT_SKIPS))
    def test_export_skip_still_fails(entry: SkipEntry) -> None:
        backends = ("onnx", "executorch") if entry.scope in ("all", "dynamic") else (entry.scope,)
        for backend in backends:
            assert _export(entry, backend)["status"] == "pass", entry.reason


if ONNX_DISABLE_OPTIMIZE:

    @pytest.mark.slow
    @pytest.mark.parametrize("entry", _params(ONNX_DISABLE_OPTIMIZE))
    def test_onnx_optimizer_bug_still_present(entry: SkipEntry) -> None:
        # With the optimizer on (no override list), the upstream bug must still break the export.
        from export_sweep.zoo import build_tiny_model

        tiny = build_tiny_model(entry.model_type)
        result = export_backend(
            tiny.model, tiny.inputs, "onnx", class_name=tiny.class_name, skips=(), optimize_off=()
        )
        assert result["status"] == "pass", entry.reason
