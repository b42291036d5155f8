"""Pytree registration of ``transformers`` ``Cache`` subclasses, cache layers and ``ModelOutput`` s.

``torch.export`` flattens inputs and outputs with ``torch.utils._pytree``. ``transformers``
registers its ``ModelOutput`` subclasses itself; caches are plain Python objects it does not
register. Here every ``Cache`` subclass and every cache-layer class is registered generically:
public tensor attributes, nested caches and lists of layers are children, all other attributes
(private tensors such as a sliding window's size included) are the context. The context is
JSON-dumpable, as ExecuTorch's program serialization needs for the output tree. A flatten ->
unflatten -> flatten round trip checks each registration.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

import torch
import torch.utils._pytree as pytree

__all__ = ["register_pytree_nodes", "registered_types", "check_roundtrip"]

logger = logging.getLogger(__name__)
_LOCK = threading.Lock()
_REGISTERED: set[type] = set()


def _all_subclasses(cls: type) -> list[type]:
    out, stack = [], [cls]
    while stack:
        c = stack.pop()
        for sub in c.__subclasses__():
            if sub not in out:
                out.append(sub)
                stack.append(sub)
    return out


def _is_child(value: Any, node_types: tuple[type, ...]) -> bool:
    kinds = (torch.Tensor, *node_types)
    if isinstance(value, kinds):
        return True
    if isinstance(value, list | tuple) and value:
        return all(isinstance(v, kinds) for v in value)
    return False


def _make_flatten(node_types: tuple[type, ...]):
    def children_and_context(obj: Any) -> tuple[list[str], dict[str, Any]]:
        names, context = [], {}
        for k, v in vars(obj).items():
            # private tensors (``_sliding_window_tensor``) are constants of the layer, not state
            if not k.startswith("_") and _is_child(v, node_types):
                names.append(k)
            else:
                context[k] = v
        return names, context

    def flatten(obj: Any) -> tuple[list[Any], Any]:
        names, context = children_and_context(obj)
        return [getattr(obj, k) for k in names], (type(obj), tuple(names), _Context(context))

    def flatten_with_keys(obj: Any) -> tuple[list[tuple[Any, Any]], Any]:
        values, ctx = flatten(obj)
        return [(pytree.GetAttrKey(k), v) for k, v in zip(ctx[1], values)], ctx

    return flatten, flatten_with_keys


class _Context:
    """Non-tensor attributes of a flattened object; compared by keys and non-tensor values."""

    def __init__(self, attrs: dict[str, Any]) -> None:
        self.attrs = attrs

    def _key(self) -> tuple[Any, ...]:
        items = []
        for k, v in sorted(self.attrs.items()):
            try:
                hash(v)
                items.append((k, v))
            except TypeError:
                items.append((k, repr(type(v))))
        return tuple(items)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Context) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return f"_Context({sorted(self.attrs)})"


def _encode(value: Any) -> Any:
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        return {"tensor": value.item(), "dtype": str(value.dtype).removeprefix("torch.")}
    if isinstance(value, torch.device):
        return {"device": str(value)}
    if isinstance(value, torch.dtype):
        return {"dtype": str(value).removeprefix("torch.")}
    if isinstance(value, list | tuple):
        return [_encode(v) for v in value]
    return {"repr": repr(value)}


def _decode(value: Any) -> Any:
    if isinstance(value, list):
        return [_decode(v) for v in value]
    if not isinstance(value, dict):
        return value
    if "tensor" in value:
        return torch.tensor(value["tensor"], dtype=getattr(torch, value["dtype"]))
    if "device" in value:
        return torch.device(value["device"])
    if "dtype" in value:
        return getattr(torch, value["dtype"])
    return value.get("repr")


def _to_dumpable(context: Any) -> Any:
    """The context as JSON data: the class's import path, the child names, the encoded attributes
    (objects with no JSON form keep their ``repr``)."""
    cls, names, attrs = context
    return {"type": f"{cls.__module__}:{cls.__qualname__}", "children": list(names),
            "attrs": {k: _encode(v) for k, v in attrs.attrs.items()}}


def _from_dumpable(data: Any) -> Any:
    import importlib

    module, _, qualname = data["type"].partition(":")
    cls: Any = importlib.import_module(module)
    for part in qualname.split("."):
        cls = getattr(cls, part)
    return cls, tuple(data["children"]), _Context({k: _decode(v) for k, v in data["attrs"].items()})


def _unflatten(values: Any, context: Any) -> Any:
    cls, names, attrs = context
    obj = cls.__new__(cls)
    obj.__dict__.update(attrs.attrs)
    for k, v in zip(names, values):
        setattr(obj, k, list(v) if isinstance(v, tuple) and k == "layers" else v)
    return obj


def register_pytree_nodes() -> list[type]:
    """Register every ``transformers`` cache and cache-layer class as a pytree node.

    Idempotent and thread-safe. Does nothing when ``transformers`` is not installed.

    Returns:
        The classes registered by this call (empty when all were registered already).
    """
    try:
        from transformers import cache_utils
        from transformers.utils import ModelOutput
    except ImportError:
        return []
    base_types: list[type] = [cache_utils.Cache]
    for name in ("CacheLayerMixin", "LinearAttentionCacheLayerMixin", "DummyLayer"):
        if hasattr(cache_utils, name):
            base_types.append(getattr(cache_utils, name))
    classes: list[type] = []
    for base in base_types:
        for c in [base, *_all_subclasses(base)]:
            if c not in classes:
                classes.append(c)
    node_types = tuple(base_types)
    flatten, flatten_with_keys = _make_flatten(node_types)
    new = []
    with _LOCK:
        for cls in classes:
            if cls in _REGISTERED or cls in pytree.SUPPORTED_NODES:
                _REGISTERED.add(cls)
                continue
            pytree.register_pytree_node(
                cls,
                flatten,
                _unflatten,
                serialized_type_name=f"{cls.__module__}.{cls.__qualname__}",
                flatten_with_keys_fn=flatten_with_keys,
                to_dumpable_context=_to_dumpable,
                from_dumpable_context=_from_dumpable,
            )
            _REGISTERED.add(cls)
            new.append(cls)
        # ModelOutput subclasses register themselves on definition; cover any that did not.
        for cls in _all_subclasses(ModelOutput):
            if cls not in pytree.SUPPORTED_NODES:
                try:
                    from transformers.utils.generic import _register_model_output_pytree_node

                    _register_model_output_pytree_node(cls)
                    new.append(cls)
                except Exception as e:  # pragma: no cover - depends on transformers internals
                    logger.debug("could not register %s: %s", cls, e)
    if new:
        logger.debug("registered %d pytree node types", len(new))
    return new


def registered_types() -> list[type]:
    """The cache and cache-layer classes registered by :func:`register_pytree_nodes`."""
    return sorted(_REGISTERED, key=lambda c: c.__qualname__)


def check_roundtrip(obj: Any) -> None:
    """Flatten ``obj``, rebuild it, flatten again and check leaves and spec agree.

    Raises:
        AssertionError: the rebuilt object flattens differently (a broken registration).
    """
    leaves, spec = pytree.tree_flatten(obj)
    rebuilt = pytree.tree_unflatten(leaves, spec)
    leaves2, spec2 = pytree.tree_flatten(rebuilt)
    if spec != spec2 or len(leaves) != len(leaves2):
        raise AssertionError(f"pytree round trip changed the structure of {type(obj).__name__}")
    for a, b in zip(leaves, leaves2):
        if a is not b:
            raise AssertionError(f"pytree round trip changed a leaf of {type(obj).__name__}")
