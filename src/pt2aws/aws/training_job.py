"""Run ``pt2aws.train`` as a SageMaker training job (SDK v3 ``ModelTrainer`` + ``Torchrun``).

The job runs the very same entry point as a local run: SageMaker's torchrun driver starts
``torchrun --nnodes <instances> --nproc_per_node <GPUs> train_entry.py --<field> <value> ...`` on
every instance, and ``train_entry.py`` calls :func:`pt2aws.train.main`. The image is the AWS
PyTorch training DLC (:func:`pt2aws.aws.training_images.training_image_uri`); code, data and
hyperparameters come from :mod:`pt2aws.aws.training_inputs`.

* :func:`training_job_spec`: what the job will run, resolved offline.
* :func:`launch_training_job`: stage code and data, then ``ModelTrainer.train``. The job writes
  the run folder (``model/``, ``metrics.json``, ``train_log.jsonl``) to ``/opt/ml/model``, which
  SageMaker uploads as ``model.tar.gz``; extracted, it is a local run's ``train/`` folder.
* :func:`launch_on`: the notebooks' one call, on the session's account (or the emulator).

Every call takes the :class:`pt2aws.aws.session.AwsSession` made once in the notebook.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path

from pt2aws.aws.training_images import (
    DEFAULT_TRAINING_INSTANCE_TYPE,
    TRAINING_TORCH_VERSION,
    training_image_uri,
)
from pt2aws.aws.training_inputs import (
    DATA_CHANNEL,
    ENTRY_SCRIPT,
    MODEL_CHANNEL,
    SM_CHANNEL_ROOT,
    SM_CHECKPOINT_DIR,
    SM_MODEL_DIR,
    container_overrides,
    hyperparameters_from_config,
    prepare_data,
    stage_source,
)

logger = logging.getLogger(__name__)

DEFAULT_MAX_RUNTIME_S = 4 * 3600


@dataclass
class TrainingJobSpec:
    """What a SageMaker training job will run (built offline by :func:`training_job_spec`).

    Attributes:
        image_uri: the training container.
        instance_type: e.g. ``"ml.p4d.24xlarge"``.
        instance_count: instances (more than 1: multi-node torchrun).
        processes_per_node: torchrun processes per instance; None: one per GPU.
        hyperparameters: ``TrainConfig`` fields as strings, with container paths.
        model_channel: local model folder sent as the ``model`` channel, or None.
        max_runtime_s: SageMaker stops the job after this many seconds (the billing cap).
        environment: container environment variables.
    """

    image_uri: str
    instance_type: str
    instance_count: int
    processes_per_node: int | None
    hyperparameters: dict[str, str]
    model_channel: str | None = None
    max_runtime_s: int = DEFAULT_MAX_RUNTIME_S
    environment: dict[str, str] = field(default_factory=dict)


def training_job_spec(
    cfg,
    *,
    instance_type: str = DEFAULT_TRAINING_INSTANCE_TYPE,
    instance_count: int = 1,
    processes_per_node: int | None = None,
    region: str = "us-east-1",
    pytorch_version: str = TRAINING_TORCH_VERSION,
    max_runtime_s: int = DEFAULT_MAX_RUNTIME_S,
) -> TrainingJobSpec:
    """Resolve image, compute and hyperparameters for ``cfg`` without any AWS call.

    See :func:`pt2aws.aws.training_inputs.container_overrides` for the fields replaced by
    container paths and the model sent as a channel (training jobs have internet access unless
    network isolation is on, so hub ids are downloaded in the container).

    Raises:
        pt2aws.aws.training_images.TrainingImageError: see
            :func:`pt2aws.aws.training_images.training_image_uri`.
        ValueError: ``instance_count`` < 1, ``processes_per_node`` < 1 or ``max_runtime_s`` < 1.
    """
    if instance_count < 1:
        raise ValueError(f"instance_count must be >= 1, got {instance_count}")
    if processes_per_node is not None and processes_per_node < 1:
        raise ValueError(
            f"processes_per_node must be >= 1 (or None: one per GPU), got {processes_per_node}"
        )
    if max_runtime_s < 1:
        raise ValueError(f"max_runtime_s must be >= 1 second, got {max_runtime_s}")
    image = training_image_uri(instance_type, region, pytorch_version)
    overrides, model_dir = container_overrides(
        cfg, SM_CHANNEL_ROOT, SM_MODEL_DIR, SM_CHECKPOINT_DIR
    )
    return TrainingJobSpec(
        image_uri=image,
        instance_type=instance_type,
        instance_count=instance_count,
        processes_per_node=processes_per_node,
        hyperparameters=hyperparameters_from_config(cfg, **overrides),
        model_channel=model_dir,
        max_runtime_s=max_runtime_s,
        environment={"TOKENIZERS_PARALLELISM": "false", "HF_HUB_DISABLE_TELEMETRY": "1"},
    )


@dataclass
class LaunchedJob:
    """A created training job: its name, request summary and where its model will land.

    Attributes:
        name: the training job's name.
        spec: what it runs.
        model_artifact_s3: ``s3://.../<job>/output/model.tar.gz`` (written when it completes).
        status: ``TrainingJobStatus`` right after creation.
    """

    name: str
    spec: TrainingJobSpec
    model_artifact_s3: str
    status: str


def model_trainer(spec: TrainingJobSpec, *, role_arn, session, bucket, source_dir, base_job_name):
    """The SDK v3 ``ModelTrainer`` for ``spec`` (nothing is sent yet; notebook 01 shows this).

    Args:
        spec: what :func:`training_job_spec` resolved (image, compute, hyperparameters).
        role_arn: the SageMaker execution role.
        session: a ``boto3.Session`` (the emulator's or the account's).
        bucket: S3 bucket for the source, the data channel, checkpoints and the model.
        source_dir: folder with the entry script and ``requirements.txt``.
        base_job_name: job name prefix (SageMaker adds a timestamp).
    """
    from sagemaker.core.helper.session_helper import Session
    from sagemaker.core.shapes import OutputDataConfig, StoppingCondition
    from sagemaker.train import ModelTrainer
    from sagemaker.train.configs import CheckpointConfig, Compute, SourceCode
    from sagemaker.train.distributed import Torchrun

    return ModelTrainer(
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
        checkpoint_config=CheckpointConfig(local_path=SM_CHECKPOINT_DIR),
    )


def launch_training_job(
    session,
    cfg,
    *,
    work_dir: str | Path,
    bucket: str | None = None,
    base_job_name: str = "pt2aws-train",
    wait: bool = False,
    **spec_kwargs,
) -> LaunchedJob:
    """Create a SageMaker training job that runs ``pt2aws.train`` with ``cfg`` under torchrun.

    Stages code and data under ``work_dir``; the SDK uploads them to
    ``s3://<bucket>/<base_job_name>/<job>/input/{code,sm_drivers,train[,model]}``. The trained
    run folder lands in ``s3://<bucket>/<base_job_name>/<job>/output/model.tar.gz``.

    Args:
        session: the :class:`pt2aws.aws.session.AwsSession` (region, execution role: the job
            assumes it and needs S3 read/write on ``bucket``).
        cfg: the :class:`pt2aws.config.TrainConfig` to run (``output_dir`` and ``dataset`` are
            replaced by container paths).
        work_dir: local scratch folder for the staged code and data.
        bucket: S3 bucket for inputs and outputs; default ``sagemaker-<region>-<account>``.
        base_job_name: prefix of the job name and of its S3 folder.
        wait: block until the job finishes (minutes to hours on AWS).
        **spec_kwargs: :func:`training_job_spec`'s ``instance_type``, ``instance_count``,
            ``processes_per_node``, ``pytorch_version``, ``max_runtime_s``.

    Returns:
        A :class:`LaunchedJob`.

    Raises:
        pt2aws.aws.session.RoleError: the session has no execution role (before any AWS call).
        pt2aws.aws.training_images.TrainingImageError, ValueError: see :func:`training_job_spec`
            (before any AWS call).
    """
    from sagemaker.train.configs import InputData

    from pt2aws.aws.session import default_bucket

    role_arn = session.require_role()
    spec = training_job_spec(cfg, region=session.region, **spec_kwargs)
    work_dir = Path(work_dir)
    source_dir = stage_source(work_dir / "code")
    data_file = prepare_data(cfg, work_dir / "data")
    boto = session.boto()
    bucket = bucket or default_bucket(session)
    trainer = model_trainer(
        spec,
        role_arn=role_arn,
        session=boto,
        bucket=bucket,
        source_dir=source_dir,
        base_job_name=base_job_name,
    )
    channels = [InputData(channel_name=DATA_CHANNEL, data_source=str(data_file))]
    if spec.model_channel:
        channels.append(InputData(channel_name=MODEL_CHANNEL, data_source=spec.model_channel))
    started = time.perf_counter()
    trainer.train(input_data_config=channels, wait=wait, logs=wait)
    # the public ``output_data`` URI is documented as <output path>/<job name>/output/output.tar.gz
    name = trainer.output_data.rstrip("/").split("/")[-3]
    described = session.client("sagemaker").describe_training_job(TrainingJobName=name)
    logger.info("created training job %s in %.1f s", name, time.perf_counter() - started)
    return LaunchedJob(
        name=name,
        spec=spec,
        model_artifact_s3=described.get("ModelArtifacts", {}).get("S3ModelArtifacts")
        or f"s3://{bucket}/{base_job_name}/{name}/output/model.tar.gz",
        status=described["TrainingJobStatus"],
    )


def training_cost_bound(
    instance_type: str, instance_count: int, max_runtime_s: int, region: str = "us-east-1"
) -> dict:
    """About the most a job's instance time can cost: max runtime x instances x hourly price.

    SageMaker stops the job after ``MaxRuntimeInSeconds``; uploading the model after the stop
    adds a little, the ML storage volume is billed apart, and a job that fails early costs less.
    The price is the catalog's (:func:`pt2aws.sizing.pricing.price`, us-east-1; another
    region's note says so).

    Returns:
        ``{"usd": float | None, "usd_per_hour", "instance_hours", "price_verified",
        "price_source", "price", "formula"}``; ``usd`` is None when the catalog has no price for
        the type; ``price`` is the price in words (:meth:`pt2aws.sizing.pricing.InstancePrice.describe`).
    """
    from pt2aws.sizing import pricing

    price = pricing.price(instance_type, "training", region)
    instance_hours = max_runtime_s / 3600 * instance_count
    return {
        "usd": round(instance_hours * price.usd_per_hour, 2) if price else None,
        "usd_per_hour": price.usd_per_hour if price else None,
        "instance_hours": instance_hours,
        "price_verified": bool(price and price.verified),
        "price_source": price.source["url"] if price else "none in pt2aws/sizing/instances.json",
        "price": price.describe() if price else "no price in pt2aws/sizing/instances.json",
        "formula": f"{max_runtime_s / 3600:g} h x {instance_count} x "
        + (f"{price.usd_per_hour:g} USD/h" if price else "(no price known)"),
    }


def launch_on(session, cfg, *, work_dir: str | Path, **kwargs) -> dict:
    """Launch ``cfg`` as a training job where ``session`` points (your account, or the emulator).

    The notebooks' one call: :func:`launch_training_job`, then :func:`job_summary` plus
    ``target``, ``region`` and the ``cost_bound`` (:func:`training_cost_bound`). On the emulator
    the job runs nothing; the emulator can put a local run folder where its ``model.tar.gz``
    belongs (:func:`pt2aws.emulator.server.start`'s ``training_output``).

    Args:
        session: the :class:`pt2aws.aws.session.AwsSession` (region, execution role).
        cfg: the :class:`pt2aws.config.TrainConfig` to run.
        work_dir: local scratch folder for staged code and data.
        **kwargs: passed to :func:`launch_training_job` (instance type and count, ...).

    Raises:
        pt2aws.aws.session.RoleError: the session has no execution role.
    """
    job = launch_training_job(session, cfg, work_dir=work_dir, **kwargs)
    spec = job.spec
    bound = training_cost_bound(
        spec.instance_type, spec.instance_count, spec.max_runtime_s, session.region
    )
    return {
        "target": session.target,
        "region": session.region,
        **job_summary(job),
        "cost_bound": bound,
    }


def job_summary(job: LaunchedJob) -> dict:
    """A JSON-ready dict of what was launched (for the run folder)."""
    return json.loads(json.dumps(dataclasses.asdict(job)))
