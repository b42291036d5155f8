"""Tiny-model zoo: a small random-weight model and example inputs for any model type.

For every model type the installed ``transformers`` knows, the zoo shrinks the default
configuration (:mod:`.shrink`), builds the model class (:mod:`.build`) with example inputs
(:mod:`.inputs`) that an eager forward accepts, and can build the whole catalog (:mod:`.catalog`)
in isolated, memory- and time-limited workers (:mod:`.isolate`, :mod:`.sweep`)::

    python -m export_core.zoo build --all -j 2 --out zoo-results.json

``transformers`` is imported lazily: importing this package costs only ``torch``.
"""

from export_core.zoo.build import (
    TinyModel,
    ZooBuildError,
    build_tiny_model,
    load_tiny_model,
    save_tiny_model,
    tiny_config,
    zoo_cache_dir,
)
from export_core.zoo.catalog import (
    CatalogEntry,
    Modality,
    base_model_types,
    catalog,
    model_class_name,
    model_modality,
)
from export_core.zoo.inputs import ExampleInputs, InputRecipe, input_recipes, make_example_inputs
from export_core.zoo.isolate import Job, JobResult, Worker, WorkerPool, run_isolated
from export_core.zoo.shrink import shrink_config, shrink_config_dict, special_token_ids
from export_core.zoo.sweep import ZooSummary, build_zoo, load_results, summarize, zoo_job

__all__ = [
    "CatalogEntry",
    "ExampleInputs",
    "InputRecipe",
    "Job",
    "JobResult",
    "Modality",
    "TinyModel",
    "Worker",
    "WorkerPool",
    "ZooBuildError",
    "ZooSummary",
    "base_model_types",
    "build_tiny_model",
    "build_zoo",
    "catalog",
    "input_recipes",
    "load_results",
    "load_tiny_model",
    "make_example_inputs",
    "model_class_name",
    "model_modality",
    "run_isolated",
    "save_tiny_model",
    "shrink_config",
    "shrink_config_dict",
    "special_token_ids",
    "summarize",
    "tiny_config",
    "zoo_cache_dir",
    "zoo_job",
]
