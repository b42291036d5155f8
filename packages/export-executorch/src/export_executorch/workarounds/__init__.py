"""Registered ExecuTorch workarounds; importing this package registers them.

Registration is the only side effect. Each module holds one workaround, registered with
``export_core.registry`` under ``"executorch"`` (every ExecuTorch backend) or a backend sub-key
(``"executorch.xnnpack"``), with the reason it exists and the upstream bug:

- :mod:`.list_return_validator` — ExecuTorch patch (stage 3): the edge verifier specialises the
  batch of ``split`` / ``chunk`` outputs.
- :mod:`.xnnpack_reshape_dims` — ExecuTorch patches (stage 3, XNNPACK): the partitioner
  delegates 1-d convolutions and ``unsqueeze`` nodes that need a reshape with two dynamic
  dimensions, which XNNPACK cannot serialize (wav2vec2-style audio encoders).
- :mod:`.view_after_sdpa` — FX node fix (stage 5): a ``view`` of an attention output that the
  SDPA decomposition makes non-viewable (GPT-2).
"""

from __future__ import annotations

from . import list_return_validator, view_after_sdpa, xnnpack_reshape_dims

__all__ = ["list_return_validator", "view_after_sdpa", "xnnpack_reshape_dims"]
