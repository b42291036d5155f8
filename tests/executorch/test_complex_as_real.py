"""Complex tensors through ExecuTorch (``complex_as_real``): a rotary embedding written with
``polar`` / ``view_as_complex`` (Llama 4, DeepSeek-V2), a module using every elementwise and
shape op the fix rewrites, and Fourier transforms (FNet's ``fftn``, ``rfft``, WavTokenizer's
``irfft``, ``ifft``), exported with dynamic shapes on both backends and validated against eager at four
shapes; the refusals leave the program as captured; without the fix the lowering fails."""

from __future__ import annotations

import pytest
import torch

import export_executorch
from export_core import LoweringError
from export_core.registry import withheld
from export_executorch.workarounds import complex_as_real

FIX = complex_as_real.complex_as_real.__name__


class ComplexRotary(torch.nn.Module):
    """``(batch, seq, heads, 8)`` -> the same shape: each pair of features rotated by its
    position's angle, computed as a complex product (Llama 4's ``apply_rotary_emb``)."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("inv_freq", 1.0 / 10000 ** (torch.arange(0, 8, 2).float() / 8))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(x.shape[1], dtype=torch.float32)
        angles = torch.outer(positions, self.inv_freq)
        cis = torch.polar(torch.ones_like(angles), angles).to(torch.complex64)
        pairs = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
        return torch.view_as_real(pairs * cis[None, :, None, :]).flatten(3) + x


class ComplexOps(torch.nn.Module):
    """``x``, ``y`` ``(batch, seq, 8)`` -> ``(batch, 2, seq)`` float32 and
    ``(batch, 2 * seq * 2)`` float64, through complex products (complex, real and scalar
    operands), sums, negation, shape ops with negative dims, a cast to complex128, and the
    real / imaginary parts and the modulus."""

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        a = torch.view_as_complex(x.reshape(*x.shape[:-1], 4, 2))
        b = torch.complex(y[..., :4], y[..., 4:])
        c = a * b + a * 0.5 - (-b) * y[..., :4]
        c = c.transpose(-1, -2).unsqueeze(-1)
        c = torch.cat([c, c.permute(0, 1, 2, 3).clone()], dim=-1)
        c = c[:, 1:3].select(-1, 0)
        wide = c.to(torch.complex128)
        return (torch.real(c) + torch.imag(c) * c.abs(),
                torch.view_as_real(wide.reshape(c.shape[0], -1)).flatten(1))


class Spectral(torch.nn.Module):
    """``x`` ``(batch, seq, 6)`` -> FNet's mixing ``fftn(x, dim=(1, 2)).real`` ``(batch, seq, 6)``,
    a one-sided ``rfft`` over the sequence (orthonormal) ``(batch, seq // 2 + 1, 6, 2)``, and
    WavTokenizer's synthesis: ``irfft`` of a ``polar`` spectrum to 10 samples ``(batch, seq,
    10)`` and an inverse ``ifft`` (normalised forward) ``(batch, seq, 6, 2)``."""

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        spectrum = torch.polar(x.abs() + 0.1, x)
        return (torch.fft.fftn(x, dim=(1, 2)).real,
                torch.view_as_real(torch.fft.rfft(x, dim=1, norm="ortho")),
                torch.fft.irfft(spectrum, n=10, dim=-1),
                torch.view_as_real(torch.fft.ifft(spectrum, norm="forward")))


ROTARY = (torch.randn(2, 6, 3, 8),)
ROTARY_CHECKS = [(torch.randn(1, 4, 3, 8),), (torch.randn(3, 9, 3, 8),), (torch.randn(2, 2, 3, 8),)]
OPS = (torch.randn(2, 6, 8), torch.randn(2, 6, 8))
OPS_CHECKS = [(torch.randn(1, 3, 8), torch.randn(1, 3, 8)),
              (torch.randn(3, 10, 8), torch.randn(3, 10, 8)),
              (torch.randn(4, 2, 8), torch.randn(4, 2, 8))]
SPECTRAL = (torch.randn(2, 7, 6),)
SPECTRAL_CHECKS = [(torch.randn(1, 4, 6),), (torch.randn(3, 12, 6),), (torch.randn(2, 3, 6),)]


@pytest.mark.parametrize("backend", ["xnnpack", "portable"])
@pytest.mark.parametrize("model, example, checks", [(ComplexRotary, ROTARY, ROTARY_CHECKS),
                                                    (ComplexOps, OPS, OPS_CHECKS),
                                                    (Spectral, SPECTRAL, SPECTRAL_CHECKS)],
                         ids=["rotary", "ops", "fft"])
def test_complex_tensors_match_eager_at_every_shape(model, example, checks, backend) -> None:
    report = export_executorch.export(model().eval(), example, backend=backend,
                                      validation_inputs=checks).report
    assert report["status"] == "ok" and report["validation"]["passed"] is True
    assert len({str(c["shapes"]) for c in report["validation"]["checks"]}) == 4
    assert FIX in report["fixes"]["applied"]


def _captured(model: torch.nn.Module, *example: torch.Tensor) -> torch.export.ExportedProgram:
    dims = tuple({0: torch.export.Dim.AUTO, 1: torch.export.Dim.AUTO} for _ in example)
    return torch.export.export(model.eval(), example, dynamic_shapes=dims)


def test_no_complex_node_is_left() -> None:
    program = _captured(ComplexOps(), *OPS)
    result = complex_as_real.complex_as_real(program, None)
    assert result.modified and result.details >= 10
    for node in program.graph.nodes:
        val = node.meta.get("val")
        assert not (isinstance(val, torch.Tensor) and val.is_complex()), node.format_node()
    for x, y in OPS_CHECKS:
        expected = ComplexOps()(x, y)
        for got, want in zip(program.module()(x, y), expected, strict=True):
            torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


class ComplexOutput(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.view_as_complex(x.reshape(*x.shape[:-1], -1, 2)) * 2


class ComplexExp(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.view_as_real(torch.exp(torch.view_as_complex(x.reshape(*x.shape[:-1], -1, 2))))


class PaddedFFT(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.view_as_real(torch.fft.fft(x, n=16))


@pytest.mark.parametrize("model, why", [(ComplexOutput, "output"), (ComplexExp, "exp"),
                                        (PaddedFFT, "fft_fft")],
                         ids=["complex output", "unsupported op", "padded fft"])
def test_refusals_leave_the_program_as_captured(model, why) -> None:
    program = _captured(model(), torch.randn(2, 6, 8))
    before = program.graph_module.code
    result = complex_as_real.complex_as_real(program, None)
    assert not result.modified and why in result.details
    assert program.graph_module.code == before


@pytest.mark.parametrize("model, example, message", [
    (ComplexRotary, ROTARY, "polar.default is not in Core ATen"),
    (ComplexOps, OPS, "complex"),
    (Spectral, SPECTRAL, "is not in Core ATen"),
], ids=["rotary", "ops", "fft"])
def test_without_the_fix_the_lowering_fails(model, example, message) -> None:
    with withheld("executorch", FIX), pytest.raises(LoweringError, match=message):
        export_executorch.export(model().eval(), example, backend="xnnpack")
