"""Loading a local Hugging Face model directory (``config.json`` + weights, optional tokenizer)."""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import LoadError
from .tasks import TaskSpec, infer_task, task_spec

__all__ = ["LoadedModel", "check_model_dir", "load_model_dir", "WEIGHT_FILES"]

logger = logging.getLogger(__name__)

WEIGHT_FILES = (
    "model.safetensors",
    "model.safetensors.index.json",
    "pytorch_model.bin",
    "pytorch_model.bin.index.json",
)


@dataclass
class LoadedModel:
    """A model loaded from a directory, ready to export.

    Attributes:
        model: the ``transformers`` model in eval mode, float32, on CPU.
        config: its ``PretrainedConfig``.
        task: the resolved :class:`TaskSpec`.
        path: the model directory.
        tokenizer: the tokenizer when the directory has one, else ``None``.
    """

    model: Any
    config: Any
    task: TaskSpec
    path: Path
    tokenizer: Any = None


def check_model_dir(path: Path) -> None:
    """Check ``path`` looks like a ``save_pretrained`` directory (exists, readable, a valid
    ``config.json``, a weights file) without importing torch or transformers.

    Raises:
        LoadError: what is missing or unreadable, and what to pass instead.
    """
    if not path.exists():
        raise LoadError(f"model directory {path} does not exist; pass a directory written by save_pretrained")
    if not path.is_dir():
        raise LoadError(f"{path} is not a directory; pass a directory written by save_pretrained")
    if not os.access(path, os.R_OK | os.X_OK):
        raise LoadError(f"model directory {path} is not readable (check its permissions)")
    cfg = path / "config.json"
    if not cfg.is_file():
        raise LoadError(f"{path} has no config.json; it is not a Hugging Face model directory")
    try:
        json.loads(cfg.read_text())
    except (OSError, ValueError) as e:
        raise LoadError(f"{cfg} is unreadable or not valid JSON: {e}") from e
    if not any((path / f).is_file() for f in WEIGHT_FILES):
        raise LoadError(f"{path} holds no weights (expected one of {', '.join(WEIGHT_FILES)})")


def _load_for_task(transformers: Any, spec: TaskSpec, path: Path) -> Any:
    """The model of ``path`` loaded by the first of ``spec.auto_classes`` that maps its config.

    Raises:
        LoadError: every auto class failed; the message names the first one's error.
    """
    errors: list[tuple[str, Exception]] = []
    for name in spec.auto_classes:
        try:
            return getattr(transformers, name).from_pretrained(path, local_files_only=True,
                                                               dtype="float32")
        except Exception as e:  # noqa: BLE001 - try the next auto class, report the first
            errors.append((name, e))
    name, e = errors[0]
    first = next((ln for ln in str(e).splitlines() if ln.strip()), "")
    raise LoadError(f"cannot load {name} for task {spec.name!r} from {path}: "
                    f"{type(e).__name__}: {first}") from e


def load_model_dir(path: str | os.PathLike[str], task: str | None = None) -> LoadedModel:
    """Load the model in ``path`` for ``task`` (inferred from the config when ``None``).

    Args:
        path: a directory written by ``save_pretrained``.
        task: a pipeline task name, e.g. ``"text-generation"``.

    Returns:
        A :class:`LoadedModel` (float32, eval mode, CPU).

    Raises:
        LoadError: missing/unreadable directory, no or invalid ``config.json``, no or corrupt
            weights, or a config ``transformers`` does not know.
        InputError: unknown task (stage ``load``).
    """
    path = Path(path)
    check_model_dir(path)
    try:
        import transformers
        from transformers import AutoConfig
    except ImportError as e:  # pragma: no cover - transformers is an extra
        raise LoadError("loading a model directory needs transformers: pip install 'export-core[transformers]'") from e

    try:
        config = AutoConfig.from_pretrained(path, local_files_only=True)
    except Exception as e:
        raise LoadError(f"config.json in {path} cannot be loaded: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}") from e
    spec = task_spec(task or infer_task(config))
    model = _load_for_task(transformers, spec, path)
    model.eval()
    tokenizer = None
    if any(
        (path / f).is_file() for f in ("tokenizer.json", "tokenizer_config.json", "vocab.txt")
    ):
        try:
            from transformers import AutoTokenizer

            tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
        except Exception as e:
            logger.warning("tokenizer in %s cannot be loaded (%s); inputs are synthesized", path, e)
    return LoadedModel(model=model, config=config, task=spec, path=path, tokenizer=tokenizer)
