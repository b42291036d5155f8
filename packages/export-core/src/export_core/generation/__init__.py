"""Generation from exported graphs: the manifest, the generate loop, and the with-past export.

The loop side (:mod:`.manifest`, :mod:`.loop`, :mod:`.sampling`, :mod:`.tokenizer`) needs neither
torch nor the model; the export side (:mod:`.calls`, :mod:`.shapes`, :mod:`.export`,
:mod:`.verify`) is imported on first use.
"""

from typing import TYPE_CHECKING, Any

from .loop import (
    GenerationLoop,
    GenerationOutput,
    GenerationStep,
    GraphSession,
    left_pad,
    right_pad,
)
from .manifest import (
    MANIFEST_NAME,
    CacheLayout,
    GenerationError,
    GenerationManifest,
    GraphSpec,
    TokenRules,
    read_manifest,
)
from .sampling import SamplingOptions, next_tokens
from .tokenizer import TextTokenizer, load_tokenizer

if TYPE_CHECKING:
    from .export import WITH_PAST_TASK, WITH_PAST_TASKS, GenerativeExport, export_with_past
    from .verify import GenerationCheck, compare_with_eager

_LAZY = {"WITH_PAST_TASK": "export", "WITH_PAST_TASKS": "export", "GenerativeExport": "export", "export_with_past": "export",
         "GenerationCheck": "verify", "compare_with_eager": "verify"}

__all__ = ["MANIFEST_NAME", "CacheLayout", "GenerationCheck", "GenerationError", "GenerationLoop",
           "GenerationManifest", "GenerationOutput", "GenerationStep", "GenerativeExport", "GraphSession",
           "GraphSpec", "SamplingOptions", "TextTokenizer", "TokenRules", "WITH_PAST_TASK", "WITH_PAST_TASKS",
           "compare_with_eager", "export_with_past", "left_pad", "load_tokenizer", "next_tokens",
           "read_manifest", "right_pad"]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
