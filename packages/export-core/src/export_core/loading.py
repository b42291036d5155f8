"""Loading a local Hugging Face model directory (``config.json`` + weights, optional tokenizer)."""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import LoadError, first_line
from .tasks import TaskSpec, infer_task, task_spec

__all__ = ["LoadedModel", "PICKLE_REFUSED", "REMOTE_CODE_REFUSED", "check_model_dir",
           "load_model_dir", "model_class_for", "WEIGHT_FILES"]

logger = logging.getLogger(__name__)

WEIGHT_FILES = (
    "model.safetensors",
    "model.safetensors.index.json",
    "pytorch_model.bin",
    "pytorch_model.bin.index.json",
)

PICKLE_REFUSED = (
    "pickle weights are loaded with torch.load(weights_only=True) only and this tool offers no "
    "option to load arbitrary objects; convert the weights to safetensors "
    "(save_pretrained(..., safe_serialization=True)) with the code that wrote them"
)
"""Why a ``pytorch_model.bin`` holding more than tensors is refused, and the next step."""

REMOTE_CODE_REFUSED = (
    "this tool never runs code from a model directory (trust_remote_code is off and has no "
    "option); export a model class transformers ships, or pass the module you built yourself "
    "to a backend's Python export function"
)
"""Why a ``config.json`` with an ``auto_map`` (custom modelling code) is refused."""


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
        data = json.loads(cfg.read_text())
    except (OSError, ValueError) as e:
        raise LoadError(f"{cfg} is unreadable or not valid JSON: {e}") from e
    if not isinstance(data, dict):
        raise LoadError(f"{cfg} holds a JSON {type(data).__name__}, not an object; it is not a "
                        "Hugging Face config")
    if data.get("auto_map"):
        raise LoadError(f"{cfg} asks for custom code (auto_map: "
                        f"{', '.join(sorted(map(str, data['auto_map'])))}); {REMOTE_CODE_REFUSED}")
    if not any((path / f).is_file() for f in WEIGHT_FILES):
        raise LoadError(f"{path} holds no weights (expected one of {', '.join(WEIGHT_FILES)})")


def _load_for_task(transformers: Any, spec: TaskSpec, path: Path,
                   config: Any = None) -> tuple[Any, dict[str, Any], str]:
    """The model of ``path`` loaded by the first of ``spec.auto_classes`` that maps its config
    (safetensors first, pickles with ``weights_only=True``, no remote code, mismatched shapes
    kept for :func:`_check_loading_info`), else by :func:`_architecture_class`.

    Returns:
        The model, its loading info and the class that loaded it.

    Raises:
        LoadError: the pickle weights hold objects other than tensors; or every class failed
            (the message names the first one's error).
    """
    errors: list[tuple[str, Exception]] = []
    named = _architecture_class(transformers, spec, config)
    for name in (*spec.auto_classes, *([named] if named else [])):
        try:
            model, info = getattr(transformers, name).from_pretrained(
                path, local_files_only=True, dtype="float32", trust_remote_code=False,
                output_loading_info=True, ignore_mismatched_sizes=True,
            )
            return model, info, name
        except Exception as e:  # noqa: BLE001 - try the next auto class, report the first
            if "weights only load failed" in str(e).lower():
                raise LoadError(f"the pickle weights in {path} hold objects other than tensors; "
                                f"{PICKLE_REFUSED}") from e
            errors.append((name, e))
    name, e = errors[0]
    raise LoadError(f"cannot load {name} for task {spec.name!r} from {path}: {first_line(e)}") from e


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

    Weights are read as transformers reads them, never with custom code
    (``trust_remote_code=False``); ``model.safetensors`` is preferred, a pickle
    ``pytorch_model.bin`` is read with ``weights_only=True`` (anything but tensors is refused,
    :data:`PICKLE_REFUSED`). Weights that do not fit the config (a shape mismatch, a weight the
    model needs that the files lack) are refused rather than initialised at random, and a config
    without ``architectures`` needs ``task``: the model class is not guessed.
    """
    path = Path(path)
    check_model_dir(path)
    from .exporter import first_line

    try:
        import transformers
        from transformers import AutoConfig
    except ImportError as e:  # pragma: no cover - transformers is an extra
        raise LoadError("loading a model directory needs transformers: pip install 'export-core[transformers]'") from e

    try:
        config = AutoConfig.from_pretrained(path, local_files_only=True, trust_remote_code=False)
    except Exception as e:
        raise LoadError(f"config.json in {path} cannot be loaded: {first_line(e)}") from e
    if task is None and not getattr(config, "architectures", None):
        raise LoadError(
            f"config.json in {path} names no architectures, so the model class and task cannot "
            "be inferred; pass --task (feature-extraction for the bare model)"
        )
    spec = task_spec(task or infer_task(config))
    model, info, loaded_by = _load_for_task(transformers, spec, path, config)
    _check_loading_info(info, path, loaded_by)
    model.eval()
    tokenizer = None
    if any(
        (path / f).is_file() for f in ("tokenizer.json", "tokenizer_config.json", "vocab.txt")
    ):
        try:
            from transformers import AutoTokenizer

            tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True,
                                                      trust_remote_code=False)
        except Exception as e:
            logger.warning("tokenizer in %s cannot be loaded (%s); inputs are synthesized", path, e)
    return LoadedModel(model=model, config=config, task=spec, path=path, tokenizer=tokenizer)


def model_class_for(config: Any, task: str | None = None) -> str | None:
    """The name of the ``transformers`` class :func:`load_model_dir` loads a directory holding
    ``config`` with: the class the first of the task's auto classes maps the config to (its
    ``architectures`` decide between a mapping's alternatives), else the fallback of
    :func:`_architecture_class`; ``None`` when the loader would find no class.

    Args:
        config: a ``transformers`` config, with ``architectures`` as ``save_pretrained`` writes
            them (the saved model's class first).
        task: the task; ``None`` infers it from ``config`` as the command-line tools do.

    Raises:
        InputError: unknown ``task``.

    The coverage sweep compares it with the class it exported, so that a pass means that
    ``export-onnx DIR`` exports that same model.
    """
    import transformers

    spec = task_spec(task or infer_task(config))
    for name in spec.auto_classes:
        auto = getattr(transformers, name, None)
        mapping = getattr(auto, "_model_mapping", None)
        try:
            if mapping is None or type(config) not in mapping:
                continue
            from transformers.models.auto.auto_factory import _get_model_class

            return _get_model_class(config, mapping).__name__
        except Exception:  # noqa: BLE001 - a lazy mapping that cannot resolve: not this class
            continue
    return _architecture_class(transformers, spec, config)


def _architecture_class(transformers: Any, spec: TaskSpec, config: Any) -> str | None:
    """The class ``config.architectures`` names first, where no auto class of ``spec`` maps the
    config and ``spec`` is the task inferred from that class, else ``None``.

    Some base models take a sub-config that no auto mapping lists: ``MusicgenModel`` is built
    from ``MusicgenDecoderConfig`` (``model_type`` ``musicgen_decoder``), which ``AutoModel``
    does not map, so ``save_pretrained`` writes a directory that no auto class loads. The class
    is taken from ``transformers`` itself (never custom code) and must declare the config's own
    class.
    """
    if config is None:
        return None
    for name in spec.auto_classes:
        mapping = getattr(getattr(transformers, name, None), "_model_mapping", None)
        try:
            if mapping is not None and type(config) in mapping:
                return None
        except Exception:  # noqa: BLE001 - a lazy mapping that cannot resolve: not mapped
            pass
    archs = getattr(config, "architectures", None) or []
    if not archs or not isinstance(archs[0], str) or infer_task(config) != spec.name:
        return None
    try:
        cls = getattr(transformers, archs[0])
    except Exception:  # noqa: BLE001 - not a transformers class (or its backend is missing)
        return None
    if isinstance(cls, type) and getattr(cls, "config_class", None) is type(config):
        return archs[0]
    return None


def _check_loading_info(info: dict[str, Any], path: Path, auto_class: str) -> None:
    """Refuse weights that do not fit the config: transformers would initialise the mismatched
    and missing ones at random and only log it.

    Raises:
        LoadError: a weight's shape differs from the config's, or a weight is missing.
    """
    mismatched = list(info.get("mismatched_keys") or [])
    if mismatched:
        key, found, wanted = mismatched[0]
        more = f" (and {len(mismatched) - 1} more)" if len(mismatched) > 1 else ""
        raise LoadError(
            f"the weights in {path} do not match its config.json: {key} is "
            f"{list(found)} in the weights, {list(wanted)} by the config{more}; pass the config "
            "the weights were saved with"
        )
    missing = sorted(info.get("missing_keys") or [])
    if missing:
        shown = ", ".join(missing[:3]) + (f" and {len(missing) - 3} more" if len(missing) > 3 else "")
        raise LoadError(
            f"the weights in {path} lack {len(missing)} tensor(s) {auto_class} needs ({shown}); "
            "they would be random: pass the --task whose head the weights were saved with"
        )
