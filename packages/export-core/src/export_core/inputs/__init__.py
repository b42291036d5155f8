"""Example inputs for a model: one builder for the command-line tools and the coverage sweep.

- :mod:`.recipes`: input *recipes* (text, pixels, patches, spectrograms, waveforms, multimodal
  placeholders, ...) chosen from a model's ``forward`` signature and config;
- :mod:`.sets`: the export and validation sets of one export (:func:`build_input_sets`);
- :mod:`.input_names`: the inputs the model's tokenizer produces;
- :mod:`.special_tokens`: special token ids that random tokens avoid.
"""

from .input_names import TOKENIZER_INPUTS, tokenizer_input_names
from .recipes import (
    DEFAULT_SHAPES,
    ExampleInputs,
    InputRecipe,
    find_config_value,
    forward_parameters,
    input_recipes,
    make_example_inputs,
)
from .sets import BATCH_ONE_SHAPE, SAMPLE_SENTENCES, InputSets, build_input_sets, eager_check
from .special_tokens import special_token_ids

__all__ = [
    "BATCH_ONE_SHAPE",
    "DEFAULT_SHAPES",
    "ExampleInputs",
    "InputRecipe",
    "InputSets",
    "SAMPLE_SENTENCES",
    "TOKENIZER_INPUTS",
    "build_input_sets",
    "eager_check",
    "find_config_value",
    "forward_parameters",
    "input_recipes",
    "make_example_inputs",
    "special_token_ids",
    "tokenizer_input_names",
]
