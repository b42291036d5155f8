"""Tiny-model zoo: a small random-weight model and example inputs for any model type.

For every model type the installed ``transformers`` knows, the zoo shrinks the default
configuration (:mod:`.shrink`), builds the model class (:mod:`.build`) with example inputs
(:mod:`.inputs`) that an eager forward accepts, and can build the whole catalog (:mod:`.catalog`)
in isolated, memory- and time-limited workers (:mod:`.isolate`, :mod:`.batch`)::

    python -m export_sweep.zoo build --all -j 2 --out zoo-results.json

``transformers`` is imported lazily: importing this package costs only ``torch``.
"""

from export_sweep.zoo.batch import ZooSummary, build_zoo, failure_reason, summarize, zoo_job
from export_sweep.zoo.build import (
    TinyModel,
    ZooBuildError,
    build_tiny_model,
    load_tiny_model,
    save_tiny_model,
    tiny_config,
    zoo_cache_dir,
)
from export_sweep.zoo.cache import zoo_cache_root
from export_sweep.zoo.catalog import (
    CatalogEntry,
    Modality,
    base_model_types,
    catalog,
    model_class_name,
    model_modality,
)
from export_sweep.zoo.inputs import ExampleInputs, InputRecipe, input_recipes, make_example_inputs
from export_sweep.zoo.isolate import Job, JobResult, Worker, WorkerPool, run_isolated
from export_sweep.zoo.shrink import shrink_config, shrink_config_dict, special_token_ids

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
    "failure_reason",
    "input_recipes",
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
    "zoo_cache_root",
    "zoo_job",
]
