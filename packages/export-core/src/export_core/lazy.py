"""Public names imported on first access (PEP 562), so a package's command answers ``--help``
and usage errors without importing torch."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["LazyExports"]


@dataclass(frozen=True)
class LazyExports:
    """The module hooks of a package whose public names live in submodules.

    Use as ``__getattr__, __dir__ = LazyExports(__name__, {"export": ".api"}, __all__).hooks()``
    in the package's ``__init__``.

    Attributes:
        package: the package's ``__name__``.
        modules: public name -> the (relative) submodule that defines it.
        public: the package's ``__all__``.
    """

    package: str
    modules: Mapping[str, str]
    public: Sequence[str]

    def hooks(self) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
        """``(__getattr__, __dir__)`` for the package. ``__getattr__`` imports the submodule,
        caches the name in the package's namespace and returns it.

        Raises (from ``__getattr__``):
            AttributeError: the name is not one of :attr:`modules`.
        """
        namespace = importlib.import_module(self.package).__dict__

        def __getattr__(name: str) -> Any:
            module = self.modules.get(name)
            if module is None:
                raise AttributeError(f"module {self.package!r} has no attribute {name!r}")
            value = getattr(importlib.import_module(module, self.package), name)
            namespace[name] = value
            return value

        def __dir__() -> list[str]:
            return sorted(set(namespace) | set(self.public))

        return __getattr__, __dir__
