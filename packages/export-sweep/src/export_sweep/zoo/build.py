"""Build a tiny random-weight model of any ``transformers`` model type, with example inputs.

``build_tiny_model("llama")`` shrinks the type's default configuration (:mod:`.shrink`), picks
the class (:mod:`.catalog`), instantiates it in ``eval()`` mode with SDPA attention (eager when
the class has no SDPA path), and builds two example input sets that an eager forward accepts
(:mod:`.inputs`). ``save_tiny_model`` writes ``save_pretrained`` output (``config.json`` +
``model.safetensors``) plus the example inputs, cached on disk per model type and
``transformers`` version.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import torch

from export_sweep.errors import first_line
from export_sweep.zoo.cache import zoo_cache_root
from export_sweep.zoo.catalog import Modality, model_class_name, model_modality
from export_sweep.zoo.inputs import ExampleInputs, make_example_inputs
from export_sweep.zoo.shrink import (
    TARGETS,
    ShrinkTargets,
    config_tree,
    fix_modeling_defaults,
    is_sub_config,
    shrink_config,
)

__all__ = [
    "MAX_PARAMETERS",
    "SHRINK_LADDER",
    "TinyModel",
    "ZooBuildError",
    "build_tiny_model",
    "load_tiny_model",
    "save_tiny_model",
    "set_everywhere",
    "tiny_config",
    "zoo_cache_dir",
]

MAX_PARAMETERS = 20_000_000
"""Refuse to allocate a model with more parameters than this (counted on the meta device)."""

_BIG = 1 << 40

SHRINK_LADDER: tuple[tuple[str, ShrinkTargets], ...] = (
    ("default", TARGETS),
    # Hybrid stacks (attention every k-th layer) and layer-index fields need more layers.
    ("4 layers", replace(TARGETS, layers=4)),
    ("all layers", replace(TARGETS, layers=_BIG, stage_depth=_BIG)),
    # Geometry tied to the image / patch / window sizes in ways the generic rule misses.
    ("original image geometry", replace(TARGETS, image=_BIG, patch=_BIG, window=_BIG)),
    ("original heads", replace(TARGETS, heads=_BIG, kv_heads=_BIG, head_dim=_BIG)),
    ("original positions", replace(TARGETS, positions=_BIG, source_positions=_BIG)),
    (
        "original audio geometry",
        replace(TARGETS, mel_bins=_BIG, source_positions=_BIG, codebook=_BIG, codebooks=_BIG),
    ),
    ("original feed-forward", replace(TARGETS, intermediate=_BIG)),
    ("original experts", replace(TARGETS, experts=_BIG, experts_per_token=_BIG)),
    ("original vocabulary", replace(TARGETS, vocab=_BIG)),
)
"""Shrink targets tried in order until the model builds and its forward runs: the default
first, then one dimension family at a time kept at its original size (as long as the model
stays under :data:`MAX_PARAMETERS`)."""

ZOO_METADATA = "zoo.json"
ZOO_INPUTS = "example_inputs.safetensors"


class ZooBuildError(RuntimeError):
    """A tiny model could not be built; ``stage`` says where.

    Attributes:
        stage: ``"config"``, ``"class"``, ``"size"``, ``"instantiate"`` or ``"forward"``.
        model_type: the model type being built.
    """

    def __init__(self, stage: str, model_type: str, message: str) -> None:
        super().__init__(f"[{stage}] {model_type}: {message}")
        self.stage = stage
        self.model_type = model_type


@dataclass
class TinyModel:
    """A tiny random-weight model and the inputs its eager forward accepts.

    Attributes:
        model_type: the ``config.model_type`` key.
        model: the model, in ``eval()`` mode, float32, on CPU.
        config: its (shrunk) configuration.
        inputs: example inputs (one or two sets) that the eager forward accepted.
        modality: input modality from the catalog.
        class_name: name of the model class.
        num_parameters: number of parameters.
        attn_implementation: ``"sdpa"`` or ``"eager"``.
        outputs: eager outputs of each input set (only when built with ``forward=True``).
        shrink: name of the :data:`SHRINK_LADDER` rung that worked (``"default"`` mostly).
    """

    model_type: str
    model: torch.nn.Module
    config: Any
    inputs: ExampleInputs
    modality: Modality
    class_name: str
    num_parameters: int
    attn_implementation: str
    outputs: list[Any] = field(default_factory=list)
    shrink: str = "default"



def tiny_config(model_type: str, targets: ShrinkTargets = TARGETS) -> Any:
    """The shrunk default configuration of ``model_type``.

    Args:
        model_type: a ``config.model_type`` key of ``CONFIG_MAPPING_NAMES``.
        targets: upper bounds of each dimension family.

    Returns:
        A ``PreTrainedConfig`` in float32 with ``use_cache=False`` where the config has it.

    Raises:
        ZooBuildError: ``stage="config"`` when the default config or its shrunk form is rejected.
    """
    from transformers import AutoConfig

    try:
        default = AutoConfig.for_model(model_type)
    except Exception as e:
        raise ZooBuildError("config", model_type, "default config: " + first_line(e)) from e
    try:
        config = shrink_config(default, targets=targets)
    except Exception as e:
        raise ZooBuildError("config", model_type, "shrunk config: " + first_line(e)) from e
    set_everywhere(config, "dtype", torch.float32)
    set_everywhere(config, "use_cache", False)
    return config


def set_everywhere(config: Any, name: str, value: Any) -> None:
    """Set ``name`` to ``value`` on ``config`` and on every sub-config it holds (a composite
    model's ``text_config``, ``vision_config``, ...) that has the attribute."""
    for _, c in config_tree(config):
        if hasattr(c, name):
            try:
                setattr(c, name, value)
            except Exception:  # noqa: BLE001 - read-only attribute on some configs
                pass


def _model_class(model_type: str, name: str | None = None) -> type:
    import transformers

    name = name or model_class_name(model_type)
    if name is None:
        raise ZooBuildError("class", model_type, "no model class in the auto mappings")
    try:
        return getattr(transformers, name)
    except Exception as e:
        raise ZooBuildError("class", model_type, f"{name}: " + first_line(e)) from e


def _config_for_class(cls: type, config: Any) -> Any:
    """The config the class declares: a composite type's base class is sometimes built from one
    of its sub-configs (``MusicgenModel`` takes the ``decoder`` config of ``MusicgenConfig``)."""
    want = getattr(cls, "config_class", None)
    if not isinstance(want, type) or isinstance(config, want):
        return config
    stack, seen = [config], set()
    while stack:
        c = stack.pop(0)
        if id(c) in seen:
            continue
        seen.add(id(c))
        if isinstance(c, want):
            return c
        stack.extend(
            v
            for k, v in vars(c).items()
            if not k.startswith("_") and hasattr(v, "to_dict") and hasattr(v, "model_type")
        )
    return config


def _apply_modeling_defaults(config: Any, cls: type) -> None:
    import inspect
    import sys

    module = sys.modules.get(cls.__module__)
    if module is None:
        return
    # The model's module and the modeling modules it borrows classes from (modular models).
    names = {cls.__module__} | {
        v.__module__
        for v in vars(module).values()
        if isinstance(v, type) and v.__module__.startswith("transformers.models.")
    }
    # ... and the modules of the sub-configs' own model classes (built through AutoModel).
    import transformers

    for _, c in config_tree(config):
        sub_cls_name = model_class_name(getattr(c, "model_type", "") or "")
        sub_cls = getattr(transformers, sub_cls_name, None) if sub_cls_name else None
        if isinstance(sub_cls, type):
            names.add(sub_cls.__module__)
    sources = []
    for name in sorted(names):
        try:
            sources.append(inspect.getsource(sys.modules[name]))
        except (OSError, TypeError, KeyError):
            continue
    fix_modeling_defaults(config, "\n".join(sources))


CHECKPOINT_INIT_STD = 0.02
"""The weight standard deviation a degenerate ``initializer_range`` / ``init_std`` is raised to."""

CHECKPOINT_LAYER_SCALE = 0.1
"""The value a degenerate layer-scale initial value is raised to (a trained layer scale's order)."""

_INIT_STD_FIELDS = frozenset({"initializer_range", "init_std"})
_LAYER_SCALE_RE = re.compile(r"^(\w+_)?layer_?scale(_init)?_value$")


def _checkpoint_like_init(config: Any) -> list[str]:
    """Raise the initial scales of ``config`` (and its sub-configs) that give a degenerate model.

    Two kinds of config default make a random model no checkpoint resembles, and a validation
    of it vacuous:

    * an ``initializer_range`` / ``init_std`` below 1e-4 (SAM's vision encoder and the
      composites that embed it, BLIP's vision tower: ``1e-10``): every weight is then about
      zero and the model's outputs are 1e-21 to 1e-9, which an artifact returning zeros
      matches within any tolerance. Raised to :data:`CHECKPOINT_INIT_STD`.
    * a layer-scale initial value below 1e-2 (``layer_scale_init_value``, ConvNeXt, VibeVoice's
      acoustic tokenizer: ``1e-6``): each residual block's contribution is then a millionth of
      its input, so the comparison checks the stem and nothing of the blocks (and a stack
      without residuals, VibeVoice's decoder, outputs 1e-9). A trained layer scale is of order
      0.1 to 1. Raised to :data:`CHECKPOINT_LAYER_SCALE`.

    Zero stays zero (a deliberately disabled scale); only positive values below the bounds
    change.

    Returns:
        the dotted names of the fields that were raised.
    """
    raised: list[str] = []
    for path, c in config_tree(config):
        for k, v in list(vars(c).items()):
            if k.startswith("_") or is_sub_config(v):
                continue
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0:
                continue
            if k in _INIT_STD_FIELDS and v < 1e-4:
                value = CHECKPOINT_INIT_STD
            elif _LAYER_SCALE_RE.match(k) and v < 1e-2:
                value = CHECKPOINT_LAYER_SCALE
            else:
                continue
            try:
                setattr(c, k, value)
            except Exception:  # noqa: BLE001 - read-only attribute on some configs
                continue
            raised.append(f"{path}{k}")
    return sorted(raised)


def _instantiate(cls: type, config: Any, model_type: str) -> tuple[torch.nn.Module, str]:
    errors = []
    for impl in ("sdpa", "eager"):
        try:
            model = cls._from_config(config, attn_implementation=impl, dtype=torch.float32)
            return model.eval(), impl
        except Exception as e:  # noqa: BLE001 - try eager next
            errors.append(e)
            if not _is_attn_error(e):
                break
    raise ZooBuildError("instantiate", model_type, first_line(errors[-1])) from errors[-1]


def _is_attn_error(e: BaseException) -> bool:
    text = str(e).lower()
    return "sdpa" in text or "attn_implementation" in text or "attention" in text


def _forward(model: torch.nn.Module, inputs: dict[str, Any]) -> Any:
    with torch.no_grad():
        return model(**inputs)


def _largest_parameters(model: torch.nn.Module, n: int = 3) -> str:
    sizes = sorted(((p.numel(), name) for name, p in model.named_parameters()), reverse=True)
    return ", ".join(f"{name} {num:,}" for num, name in sizes[:n])


def _count_on_meta(cls: type, config: Any) -> tuple[int, str] | None:
    try:
        with torch.device("meta"):
            m = cls._from_config(config)
    except Exception:  # noqa: BLE001 - some models cannot be built on meta; rely on rlimits
        return None
    return sum(p.numel() for p in m.parameters()), _largest_parameters(m)


def _build_once(
    model_type: str,
    targets: ShrinkTargets,
    *,
    forward: bool,
    seed: int,
    max_parameters: int,
    model_class: str | None = None,
    configure: Callable[[Any, type], None] | None = None,
) -> TinyModel:
    config = tiny_config(model_type, targets)
    cls = _model_class(model_type, model_class)
    config = _config_for_class(cls, config)
    _apply_modeling_defaults(config, cls)
    _checkpoint_like_init(config)
    if configure is not None:
        configure(config, cls)
    counted = _count_on_meta(cls, config)
    if counted is not None and counted[0] > max_parameters:
        raise ZooBuildError(
            "size",
            model_type,
            f"{counted[0]:,} parameters > {max_parameters:,} (largest: {counted[1]})",
        )
    torch.manual_seed(seed)
    model, impl = _instantiate(cls, config, model_type)
    _randomize_zero_linears(model, seed)
    _unit_scale_norms(model)
    outputs: list[Any] = []

    def check(inputs: dict[str, Any]) -> None:
        _forward(model, inputs)

    try:
        inputs = make_example_inputs(model, config, seed=seed, check=check if forward else None)
    except Exception as e:
        raise ZooBuildError("forward", model_type, first_line(e)) from e
    try:
        _calibrate_batch_norms(model, inputs.first)
    except Exception as e:
        raise ZooBuildError("forward", model_type, f"batch norm calibration: {first_line(e)}") from e
    if forward:
        outputs = [_forward(model, s) for s in inputs.sets]
        if _fan_in_init_if_vacuous(model, inputs.first, seed, output=outputs[0]):
            try:
                _calibrate_batch_norms(model, inputs.first)
            except Exception as e:
                raise ZooBuildError("forward", model_type,
                                    f"batch norm calibration after fan-in init: {first_line(e)}") from e
            outputs = [_forward(model, s) for s in inputs.sets]
    return TinyModel(
        model_type=model_type,
        model=model,
        config=config,
        inputs=inputs,
        modality=model_modality(model_type),
        class_name=cls.__name__,
        num_parameters=sum(p.numel() for p in model.parameters()),
        attn_implementation=impl,
        outputs=outputs,
    )


def _randomize_zero_linears(model: torch.nn.Module, seed: int) -> list[str]:
    """Give every ``nn.Linear`` whose weight initialised to all zeros random weights instead.

    Some models zero-initialise a projection (mixture-of-experts routers are the common case:
    AFMoE's ``router.gate``). With a zero router every expert scores alike, and which experts
    ``top-k`` picks is decided by tie-breaking, which runtimes implement differently (ONNX
    ``TopK`` takes the lower index; ``torch.topk`` promises no order). A checkpoint never has
    such ties, so the tiny model must not either. The weights are drawn from ``N(0, 0.02)``
    with a generator seeded by ``seed``; other parameters (position tables, class tokens) are
    left as initialised.

    Returns:
        the names of the re-initialised weights (``"<module>.weight"``).
    """
    generator = torch.Generator().manual_seed(seed)
    changed: list[str] = []
    with torch.no_grad():
        for name, module in model.named_modules():
            weight = getattr(module, "weight", None)
            if (
                isinstance(module, torch.nn.Linear)
                and isinstance(weight, torch.Tensor)
                and weight.is_floating_point()
                and weight.numel() > 0
                and not weight.any()
            ):
                noise = torch.randn(weight.shape, generator=generator, dtype=torch.float32)
                weight.copy_((noise * 0.02).to(weight.dtype))
                changed.append(f"{name}.weight")
    return changed


_NORMS = (torch.nn.modules.batchnorm._BatchNorm, torch.nn.GroupNorm, torch.nn.LayerNorm,
          torch.nn.modules.instancenorm._InstanceNorm)
"""Normalisations whose ``weight`` multiplies the normalised input as is (no ``1 + weight``)."""

NEAR_ZERO_SCALE = 0.1
"""A norm whose every scale is below this (in absolute value) initialised degenerate."""


def _unit_scale_norms(model: torch.nn.Module) -> list[str]:
    """Set to one the scales of every norm layer whose scales all initialised near zero.

    Some models initialise a ``BatchNorm2d`` / ``GroupNorm`` / ``LayerNorm`` weight like a
    projection, ``N(0, initializer_range)`` (RT-DETR's and D-FINE's encoders: gammas about 0.01).
    Each such norm then shrinks its features a hundredfold; a few in a row leave the query
    selection's scores equal to float32 rounding, so which queries ``top-k`` keeps depends on
    the runtime's summation order, not on the model (ONNX Runtime and eager pick different
    boxes). A checkpoint's gammas are of order one, so the tiny model's must be too. Only the
    ``torch.nn`` classes (the weight scales the output as is) whose scales all lie below
    :data:`NEAR_ZERO_SCALE` are changed; biases, running statistics and zero-centred norms
    (``1 + weight``, Gemma's RMSNorm) are left as initialised.

    Returns:
        the names of the reset weights (``"<module>.weight"``).
    """
    changed: list[str] = []
    with torch.no_grad():
        for name, module in model.named_modules():
            weight = getattr(module, "weight", None)
            if (
                isinstance(module, _NORMS)
                and isinstance(weight, torch.Tensor)
                and weight.is_floating_point()
                and weight.numel() > 0
                and bool((weight.abs() < NEAR_ZERO_SCALE).all())
            ):
                weight.fill_(1.0)
                changed.append(f"{name}.weight")
    return changed


def _batch_norm_stats(module: torch.nn.Module) -> tuple[torch.Tensor, torch.Tensor] | None:
    """The ``(running_mean, running_var)`` buffers of a batch norm (``torch.nn``'s or a model's
    own frozen one), or ``None`` for any other module."""
    mean = getattr(module, "running_mean", None)
    var = getattr(module, "running_var", None)
    if (isinstance(mean, torch.Tensor) and isinstance(var, torch.Tensor)
            and mean.dim() == 1 and mean.shape == var.shape and mean.is_floating_point()):
        return mean, var
    return None


def _calibrate_batch_norms(model: torch.nn.Module, inputs: dict[str, Any]) -> list[str]:
    """Set every batch norm's running variance to its input's mean square on ``inputs``.

    A fresh model's batch norms hold ``running_mean = 0``, ``running_var = 1``; in eval mode
    they then rescale nothing. A checkpoint's hold its training data's statistics, so each
    one brings its features back to order one. Some models initialise their convolutions like
    projections, ``N(0, initializer_range)`` (D-FINE's, DEIMv2's and PP-DocLayout's HGNetV2
    backbones): each one shrinks the features about tenfold, and without the rescaling the
    encoder's output reaches 1e-12. Every query-selection score is then the head's bias, and
    which queries ``top-k`` keeps is decided by tie-breaking, which ONNX Runtime and eager
    implement differently (the artifact "differs" from eager on a model no checkpoint
    resembles). One forward pass on ``inputs`` sets, in the order the batch norms run, each
    one's ``running_var`` (every channel alike) to the mean of ``(x - running_mean) ** 2`` over
    its whole input, so every later one sees rescaled features. Per-channel statistics would
    be ill-conditioned on a tiny batch: centring two values per channel (a 1x1 feature map)
    or dividing a channel that cancelled to about 1e-6 by its own spread turns float32
    rounding into order-one differences (the tiny model then disagrees with itself in
    float64 by 1e-2); one scale per module restores the magnitude and keeps the channels'
    ratios. Modules with 1-D ``running_mean`` / ``running_var`` buffers count
    (``torch.nn.BatchNorm*d``, and the frozen batch norms of DETR-style models); one whose
    input is all ``running_mean``, or whose channel axis (1) does not match, is left alone.

    Returns:
        the names of the calibrated modules, in the order they ran.
    """
    calibrated: list[str] = []

    def hook(name: str) -> Callable[[torch.nn.Module, tuple[Any, ...]], None]:
        def calibrate(module: torch.nn.Module, args: tuple[Any, ...]) -> None:
            stats = _batch_norm_stats(module)
            x = args[0] if args else None
            if (stats is None or name in calibrated or not isinstance(x, torch.Tensor)
                    or not x.is_floating_point() or x.dim() < 2
                    or x.shape[1] != stats[0].numel()):
                return
            shape = [-1 if d == 1 else 1 for d in range(x.dim())]
            square = (x.float() - stats[0].float().view(shape)).square().mean()
            if not bool(square > 0) or not bool(square.isfinite()):
                return
            stats[1].fill_(float(square))
            calibrated.append(name)
        return calibrate

    handles = [module.register_forward_pre_hook(hook(name))
               for name, module in model.named_modules() if _batch_norm_stats(module) is not None]
    if not handles:
        return calibrated
    try:
        _forward(model, inputs)
    finally:
        for handle in handles:
            handle.remove()
    return calibrated


VACUOUS_OUTPUT = 1e-3
"""A tiny model whose floating outputs all lie below this (in absolute value) is degenerate."""


def _largest_output(out: Any) -> float:
    """The largest ``|value|`` over the floating tensor leaves of ``out`` (0 when none)."""
    import torch.utils._pytree as pytree

    return max((float(t.detach().abs().max()) for t in pytree.tree_leaves(out)
                if isinstance(t, torch.Tensor) and t.is_floating_point() and t.numel()
                and bool(t.isfinite().all())), default=0.0)


def _fan_in_init_if_vacuous(model: torch.nn.Module, inputs: dict[str, Any], seed: int, *,
                            output: Any = None) -> list[str]:
    """Give the linear and convolution layers PyTorch's default (fan-in scaled) initialisation
    when every floating output on ``inputs`` lies below :data:`VACUOUS_OUTPUT`.

    A config's ``initializer_range`` is sized for the full model's widths; shrunk to a few
    channels, a deep stack without normalisation (VibeVoice's acoustic decoder: seven
    transposed convolutions drawn from N(0, 0.01) with fan-ins of 2 to 256) shrinks its signal
    at every layer and outputs 1e-9, which any artifact "matches". ``reset_parameters`` scales
    each layer to its own fan-in, as the shrunk widths need. Models with any larger output are
    left alone; the generator is seeded with ``seed``. ``output``: the model's output on
    ``inputs`` when the caller has it (no forward pass is run then).

    Returns:
        the names of the re-initialised modules (empty when the outputs were not degenerate).
    """
    if _largest_output(_forward(model, inputs) if output is None else output) >= VACUOUS_OUTPUT:
        return []
    torch.manual_seed(seed)
    changed = []
    for name, module in model.named_modules():
        if isinstance(module, (torch.nn.Linear, torch.nn.modules.conv._ConvNd)):
            module.reset_parameters()
            changed.append(name)
    return changed


_NO_RETRY = ("ImportError", "ModuleNotFoundError", "[class]")


def build_tiny_model(
    model_type: str,
    *,
    forward: bool = True,
    seed: int = 0,
    max_parameters: int = MAX_PARAMETERS,
    targets: ShrinkTargets | None = None,
    model_class: str | None = None,
    configure: Callable[[Any, type], None] | None = None,
) -> TinyModel:
    """Build a tiny random-weight model of ``model_type`` with example inputs.

    Args:
        model_type: a ``config.model_type`` key (``MODEL_MAPPING_NAMES`` or, for types without a
            base model, one of the head mappings).
        forward: run the eager forward on each input set while choosing the inputs (recommended;
            without it the first input recipe is taken unchecked).
        seed: seed of the weights and the inputs.
        max_parameters: refuse to allocate a bigger model (counted on the meta device first).
        targets: shrink with exactly these targets; ``None`` walks :data:`SHRINK_LADDER` until
            a rung works.
        model_class: the ``transformers`` class to build (a head such as
            ``"ElectraForSequenceClassification"``); ``None``: the catalog's class (the base
            model, or a head class when the type has none).
        configure: called as ``configure(config, cls)`` on the shrunk config before the model
            is instantiated, to set what a use of the model needs (the cache, ``is_decoder``).

    Returns:
        The model record; ``outputs`` holds the eager outputs when ``forward`` is true.

    Raises:
        ZooBuildError: the default rung's error (config, class, size, instantiate, forward) when
            no rung works.
    """
    ladder = SHRINK_LADDER if targets is None else (("custom", targets),)
    first_error: ZooBuildError | None = None
    for name, rung in ladder:
        try:
            tiny = _build_once(
                model_type,
                rung,
                forward=forward,
                seed=seed,
                max_parameters=max_parameters,
                model_class=model_class,
                configure=configure,
            )
        except ZooBuildError as e:
            if first_error is None:
                first_error = e
            if any(marker in str(e) for marker in _NO_RETRY):
                break
            continue
        tiny.shrink = name
        return tiny
    assert first_error is not None
    raise first_error


def _rules_digest() -> str:
    """Short digest of the zoo's rule modules, so a cache built by other rules is not reused."""
    import hashlib

    h = hashlib.sha256()
    here = Path(__file__).parent
    for name in ("shrink.py", "inputs.py", "build.py"):
        h.update((here / name).read_bytes())
    return h.hexdigest()[:10]


def zoo_cache_dir() -> Path:
    """Directory of cached tiny models for this ``transformers`` version and these rules.

    :func:`zoo_cache_root` / ``transformers-<version>`` / ``rules-<digest of shrink.py,
    inputs.py, build.py>``; each model type is a sub-folder.
    """
    import transformers

    root = zoo_cache_root()
    return root / f"transformers-{transformers.__version__}" / f"rules-{_rules_digest()}"


def _write_model_dir(tiny: TinyModel, directory: Path) -> None:
    from safetensors.torch import save_file

    tiny.model.save_pretrained(directory)
    tensors = {
        f"set{i}.{k}": v.contiguous()
        for i, s in enumerate(tiny.inputs.sets)
        for k, v in s.items()
        if isinstance(v, torch.Tensor)
    }
    if tensors:
        save_file(tensors, str(directory / ZOO_INPUTS))
    meta = {
        "model_type": tiny.model_type,
        "class_name": tiny.class_name,
        "modality": str(tiny.modality),
        "num_parameters": tiny.num_parameters,
        "attn_implementation": tiny.attn_implementation,
        "recipe": tiny.inputs.recipe,
        "shrink": tiny.shrink,
        "inputs": tiny.inputs.describe(),
    }
    (directory / ZOO_METADATA).write_text(json.dumps(meta, indent=2) + "\n")


def save_tiny_model(
    model_type: str,
    directory: str | os.PathLike[str] | None = None,
    *,
    use_cache: bool = True,
) -> Path:
    """Write a tiny model of ``model_type`` as a Hugging Face model directory.

    The directory holds ``config.json``, ``model.safetensors``, ``zoo.json`` (class, modality,
    input recipe and shapes) and ``example_inputs.safetensors`` (tensors named
    ``set<i>.<forward argument>``). Built directories are cached under :func:`zoo_cache_dir`
    so repeated sweeps do not rebuild.

    Args:
        model_type: a ``config.model_type`` key.
        directory: where to write; ``None`` returns the cache directory itself.
        use_cache: reuse (and fill) the cache; ``False`` always rebuilds.

    Returns:
        The model directory.

    Raises:
        ZooBuildError: when the model cannot be built.
    """
    cached = zoo_cache_dir() / model_type
    if not (use_cache and (cached / ZOO_METADATA).is_file()):
        tiny = build_tiny_model(model_type)
        cached.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{model_type}-", dir=cached.parent))
        try:
            _write_model_dir(tiny, tmp)
            if cached.exists():
                shutil.rmtree(cached)
            tmp.rename(cached)
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
    if directory is None:
        return cached
    target = Path(directory)
    target.mkdir(parents=True, exist_ok=True)
    for item in cached.iterdir():
        shutil.copy2(item, target / item.name)
    return target


def load_tiny_model(directory: str | os.PathLike[str]) -> tuple[torch.nn.Module, ExampleInputs]:
    """Load a directory written by :func:`save_tiny_model` with its example inputs.

    Args:
        directory: the model directory.

    Returns:
        ``(model, inputs)``: the model in ``eval()`` mode and the saved example input sets.
    """
    import transformers
    from safetensors.torch import load_file

    directory = Path(directory)
    meta = json.loads((directory / ZOO_METADATA).read_text())
    cls = getattr(transformers, meta["class_name"])
    model = cls.from_pretrained(directory, attn_implementation=meta["attn_implementation"])
    sets: dict[int, dict[str, Any]] = {}
    if (directory / ZOO_INPUTS).is_file():
        for key, value in load_file(str(directory / ZOO_INPUTS)).items():
            idx, name = key.split(".", 1)
            sets.setdefault(int(idx[3:]), {})[name] = value
    inputs = ExampleInputs(sets=tuple(sets[i] for i in sorted(sets)), recipe=meta["recipe"])
    return model.eval(), inputs
