"""Registries, reversible patching, and the capture's state cleanup."""

from __future__ import annotations

import threading

import pytest
import torch

from export_core import PatchError, apply_patches, describe, register_fx_node_fix, register_patch
from export_core.registry import backend_chain, patches_for, resolve_target, unregister

U = "https://github.com/pytorch/pytorch/issues/1"
"""A well-formed upstream link for the test registrations."""


@pytest.fixture
def cleanup():
    registered: list[tuple[str, str]] = []
    yield registered
    for backend, name in registered:
        unregister(backend, name)


def test_register_twice_is_an_error(cleanup):
    @register_patch("t1", "torch.Tensor.split", stage="test", reason="r", upstream=U)
    def f(orig):
        return orig

    cleanup.append(("t1", "torch.Tensor.split"))
    with pytest.raises(ValueError, match="registered twice"):
        register_patch("t1", "torch.Tensor.split", stage="test", reason="r", upstream=U)(f)


def test_reason_and_upstream_required():
    with pytest.raises(ValueError, match="reason"):
        register_patch("t2", "torch.add", stage="test", reason="", upstream=U)(lambda o: o)
    for bad in ("", "u", "https://github.com/pytorch/executorch/blob/main/exir/x.py",
                "https://example.com/issues/1"):
        with pytest.raises(ValueError, match="upstream must be a GitHub issue or pull request"):
            register_patch("t2", "torch.add", stage="test", reason="r", upstream=bad)(lambda o: o)


def test_describe_reports_unresolvable_targets(cleanup):
    register_patch("t3", "torch.no_such_function_anywhere", stage="test", reason="r", upstream=U)(lambda o: o)
    cleanup.append(("t3", "torch.no_such_function_anywhere"))
    rows = [r for r in describe(["t3"])]
    assert len(rows) == 1 and not rows[0].resolvable and "no_such_function" in rows[0].problem
    with apply_patches("t3") as session:
        pass
    assert "t3:torch.no_such_function_anywhere" in session.skipped


def test_every_registered_workaround_names_reason_and_upstream():
    import export_onnx  # noqa: F401  (registers the ONNX workarounds)

    rows = describe()
    assert rows, "workarounds are registered"
    for row in rows:
        assert row.reason and row.upstream.startswith("https://github.com/"), row


def test_patch_installed_fired_and_restored_on_error(cleanup):
    original = torch.Tensor.chunk
    calls = []

    @register_patch("t4", "torch.Tensor.chunk", stage="test", reason="r", upstream=U)
    def f(orig):
        def chunk(self, *a, **k):
            calls.append(1)
            return orig(self, *a, **k)
        return chunk

    cleanup.append(("t4", "torch.Tensor.chunk"))
    with pytest.raises(RuntimeError, match="boom"):
        with apply_patches("t4") as session:
            assert torch.Tensor.chunk is not original
            torch.ones(4).chunk(2)
            raise RuntimeError("boom")
    assert torch.Tensor.chunk is original
    assert session.installed == ["t4:torch.Tensor.chunk"] and session.fired == session.installed
    assert calls == [1]


def test_patch_not_called_is_not_fired(cleanup):
    register_patch("t5", "torch.Tensor.chunk", stage="test", reason="r", upstream=U)(lambda o: o)
    cleanup.append(("t5", "torch.Tensor.chunk"))
    with apply_patches("t5") as session:
        pass
    assert session.installed and not session.fired


def test_factory_error_is_patch_error_and_nothing_stays_patched(cleanup):
    original_add = torch.Tensor.add
    register_patch("t6", "torch.Tensor.add", stage="test", reason="r", upstream=U)(lambda o: o)
    register_patch("t6", "torch.Tensor.mul", stage="test", reason="r", upstream=U)(lambda o: 1 / 0)
    cleanup += [("t6", "torch.Tensor.add"), ("t6", "torch.Tensor.mul")]
    with pytest.raises(PatchError, match="could not be built"):
        with apply_patches("t6"):
            pass
    assert torch.Tensor.add is original_add


def test_patches_serialize_across_threads(cleanup):
    """Two threads patching the same attribute never see each other's replacement."""
    original = torch.Tensor.split
    register_patch("t7", "torch.Tensor.split", stage="test", reason="r", upstream=U)(lambda o: (lambda self, *a, **k: o(self, *a, **k)))
    cleanup.append(("t7", "torch.Tensor.split"))
    seen_inside = []

    def worker():
        for _ in range(20):
            with apply_patches("t7"):
                seen_inside.append(torch.Tensor.split is not original)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(seen_inside) and torch.Tensor.split is original


def test_backend_chain_and_sub_keys(cleanup):
    assert backend_chain("executorch.xnnpack") == ("executorch", "executorch.xnnpack")
    register_patch("t8", "torch.Tensor.topk", stage="test", reason="r", upstream=U)(lambda o: o)
    register_patch("t8.sub", "torch.Tensor.sort", stage="test", reason="r", upstream=U)(lambda o: o)
    cleanup += [("t8", "torch.Tensor.topk"), ("t8.sub", "torch.Tensor.sort")]
    assert [r.target for r in patches_for("t8.sub")] == ["torch.Tensor.topk", "torch.Tensor.sort"]
    assert [r.target for r in patches_for("t8")] == ["torch.Tensor.topk"]


def test_resolve_target_errors():
    assert resolve_target("torch.nn.functional.relu").attribute == "relu"
    with pytest.raises(LookupError):
        resolve_target("torch.nn.NoSuchThing.forward")


def test_node_fix_runs_and_is_reported(cleanup):
    from export_core.fixes import apply_fx_node_fixes

    @register_fx_node_fix("t9", torch.ops.aten.relu.default, stage="test", reason="r", upstream=U)
    def relu_to_clamp(node):
        node.target = torch.ops.aten.clamp.default
        node.args = (node.args[0], 0.0)
        return True

    cleanup.append(("t9", "relu_to_clamp"))
    ep = torch.export.export(torch.nn.ReLU(), (torch.randn(3, 4),))
    assert apply_fx_node_fixes(ep, "t9").applied == ("relu_to_clamp",)
    targets = [n.target for n in ep.graph.nodes if n.op == "call_function"]
    assert torch.ops.aten.clamp.default in targets and torch.ops.aten.relu.default not in targets
    x = torch.randn(3, 4)
    torch.testing.assert_close(ep.module()(x), x.relu())
