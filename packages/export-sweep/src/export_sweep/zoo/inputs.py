"""The zoo's example inputs: the product's input recipes (:mod:`export_core.inputs.recipes`).

The command-line tools build their inputs with the same recipes, so a model type the sweep
exports is exported by ``export-onnx DIR`` / ``export-executorch DIR`` with the same input layout.
"""

from export_core.inputs import recipes as _recipes
from export_core.inputs.recipes import *  # noqa: F403 - the zoo re-exports the recipes' names

__all__ = list(_recipes.__all__)
