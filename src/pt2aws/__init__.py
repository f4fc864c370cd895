"""pt2aws: fine-tune a sentiment classifier with PyTorch 2 and serve it on AWS Graviton.

The public API, by the notebook that teaches it (each name is importable from ``pt2aws``; the
modules load on first use, so ``import pt2aws`` stays cheap: no torch, no AWS SDK)::

    # every notebook: the run folder they pass state through
    RunDir                      pt2aws.rundir          named paths of runs/<timestamp>/
    TrainConfig, get_profile    pt2aws.config          profiles smoke | local | full, validated
    load_sentiment_data         pt2aws.data            tweets, your CSV/JSONL/Parquet, a hub id

    # 00 instance setup and accelerator choice
    collect_environment         pt2aws.env             versions, GPUs, CPU flags, problems + fixes
    recommend                   pt2aws.sizing  memory, workload class, ranked instances

    # 01 fine-tuning (one or many GPUs, under torchrun)
    launch_training             pt2aws.train           torchrun subprocess from a TrainConfig
    prepare_model_and_optimizer pt2aws.train.recipe    compile, DDP/FSDP, autocast, fused AdamW

    # 02 local inference
    Predictor                   pt2aws.inference       batched predictions, fast variants
    classification_metrics      pt2aws.metrics         accuracy, F1, confusion matrix (evaluate)

    # 01 and 03: where AWS calls go, chosen once (the emulator: pt2aws.emulator.server.start)
    connect, AwsSession         pt2aws.aws.session     your account's session (region, role)

    # 03 SageMaker deployment on Graviton
    package, validate_archive   pt2aws.aws.artifact    model.tar.gz built and checked offline
    inference_image_uri         pt2aws.aws.images      the image for an instance, checked offline
    new_deployment              pt2aws.aws.hosting     the three Create requests, then create/delete

Command line: ``pt2aws env|recommend|train|run|serve|cleanup`` (:mod:`pt2aws.cli`),
``python -m pt2aws.train`` / ``torchrun -m pt2aws.train``; ``make run`` is :mod:`pt2aws.pipeline`.
"""

from __future__ import annotations

import importlib
import logging

from pt2aws import system as _system

__version__ = "0.1.0"

# torchao (the int8 inference variant) is imported by transformers whenever a model class loads.
# On a CPU build of torch it logs a warning for each CUDA-only extension it cannot load, and
# torch logs a deprecation for the pytree types torchao registers; neither matters to this
# project, so keep them out of every notebook and log.
logging.getLogger("torchao").setLevel(logging.ERROR)
logging.getLogger("torch.utils._pytree").setLevel(logging.ERROR)

# A capped instruction set (ATEN_CPU_CAPABILITY=avx2 ...) gets its own torch.compile cache: kernels
# cached under one cap and reused under another crashed or answered NaN (pt2aws.system).
_system.inductor_cache_for_caps()

#: Public name -> the module that defines it (imported on first access, PEP 562).
_EXPORTS = {
    "RunDir": "pt2aws.rundir",
    "TrainConfig": "pt2aws.config",
    "get_profile": "pt2aws.config",
    "load_sentiment_data": "pt2aws.data",
    "collect_environment": ("pt2aws.env", "collect"),
    "recommend": "pt2aws.sizing.ranking",
    "launch_training": "pt2aws.train.launch",
    "prepare_model_and_optimizer": "pt2aws.train.recipe",
    "Predictor": "pt2aws.inference.predictor",
    "classification_metrics": "pt2aws.metrics",
    "package": "pt2aws.aws.artifact",
    "validate_archive": "pt2aws.aws.artifact",
    "inference_image_uri": "pt2aws.aws.images",
    "connect": "pt2aws.aws.session",
    "AwsSession": "pt2aws.aws.session",
    "new_deployment": "pt2aws.aws.hosting",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    target = _EXPORTS.get(name)
    if target is None:
        raise AttributeError(f"module 'pt2aws' has no attribute {name!r}")
    module, attr = target if isinstance(target, tuple) else (target, name)
    value = getattr(importlib.import_module(module), attr)
    globals()[name] = value  # cache: later lookups skip __getattr__
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
