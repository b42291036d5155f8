"""The zoo's example inputs: the product's input recipes (:mod:`export_core.inputs.recipes`).

The command-line tools build their inputs with the same recipes, so a model type the sweep
exports is exported by ``export-onnx DIR`` / ``export-executorch DIR`` with the same input layout.
"""

from export_core.inputs.recipes import (
    DEFAULT_SHAPES,
    ExampleInputs,
    InputRecipe,
    find_config_value,
    forward_parameters,
    input_recipes,
    make_example_inputs,
)

__all__ = [
    "DEFAULT_SHAPES",
    "ExampleInputs",
    "InputRecipe",
    "find_config_value",
    "forward_parameters",
    "input_recipes",
    "make_example_inputs",
]
