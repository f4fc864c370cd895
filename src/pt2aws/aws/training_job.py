"""``pt2aws.train`` as a SageMaker training job: SDK v3 ``ModelTrainer`` + ``Torchrun`` launch it
(``train_entry.py --<field> <value> ...`` on every instance), the ``TrainingJob`` resource waits
and stops it, its ``model.tar.gz`` comes back into the run folder. Container paths: "How Amazon
SageMaker AI runs your training image"."""

from __future__ import annotations

import contextlib
import dataclasses
import shutil
import tarfile
import tempfile
import time
from importlib import metadata
from pathlib import Path

from pt2aws.aws.images import (
    DEFAULT_TRAINING_INSTANCE_TYPE,
    TRAINING_TORCH_VERSION,
    training_image_uri,
)
from pt2aws.sizing.pricing import instance_cost

SM_CHANNEL_ROOT = "/opt/ml/input/data"
SM_MODEL_DIR = "/opt/ml/model"
#: Synced with S3, also into a restarted (Spot) job, where ``--resume auto`` continues.
SM_CHECKPOINT_DIR = "/opt/ml/checkpoints"
DATA_CHANNEL, MODEL_CHANNEL, DATA_FILE = "train", "model", "data.jsonl"
ENTRY_SCRIPT = "train_entry.py"
DEFAULT_MAX_RUNTIME_S = 4 * 3600
#: What ``pt2aws.train`` needs beside the DLC's torch, pinned to the installed versions.
CONTAINER_REQUIREMENTS = ("transformers", "tokenizers", "datasets", "safetensors",
                          "scikit-learn", "pandas", "accelerate", "tqdm")  # fmt: skip
#: What torchrun runs once per GPU on every instance.
ENTRY_SOURCE = "import sys\n\nfrom pt2aws.train import main\n\nif __name__ == '__main__':\n    main(sys.argv[1:])\n"


class TrainingJobError(RuntimeError):
    """The training job failed or was stopped (the message carries SageMaker's reason)."""


def hyperparameters_from_config(cfg, **overrides) -> dict[str, str]:
    """Every set ``TrainConfig`` field with ``overrides`` as a string (booleans ``"true"``/
    ``"false"``); the driver passes each as ``--<key> <value>``."""
    values = dataclasses.asdict(dataclasses.replace(cfg, **overrides))
    return {
        k: str(v).lower() if isinstance(v, bool) else str(v)
        for k, v in values.items()
        if v is not None
    }


def container_overrides(cfg, channel_root: str, output_dir: str, checkpoint_dir: str):
    """``(overrides, model_dir)``: the fields that point inside the container, and the local model
    to send as the ``model`` channel (None: the container builds or downloads it)."""
    from pt2aws.config import MINILM_L6
    from pt2aws.modeling import minilm_path

    overrides = {
        "output_dir": output_dir, "dataset": f"{channel_root}/{DATA_CHANNEL}/{DATA_FILE}",
        "text_column": "text", "label_column": "label",
        "header": "auto", "encoding": "utf-8",  # the prepared file: JSON Lines, whatever the source
        "checkpoint_dir": checkpoint_dir, "resume": "auto",  # not in model.tar.gz; restarts resume
    }  # fmt: skip
    name, model_dir = cfg.model_name_or_path, None
    if name == MINILM_L6 or Path(name).is_dir():
        model_dir = minilm_path() if name == MINILM_L6 else str(Path(name).resolve())
        overrides["model_name_or_path"] = f"{channel_root}/{MODEL_CHANNEL}"
    return overrides, model_dir


def prepare_data(cfg, out_dir: str | Path) -> Path:
    """``<out_dir>/data.jsonl``: the source rows (``text``, raw ``label``) before cleaning and
    split, so the container's seeded cleaning and split give a local run's splits."""
    from pt2aws import data

    out = Path(out_dir) / DATA_FILE
    out.parent.mkdir(parents=True, exist_ok=True)
    frame = data.read_source(cfg.dataset, **cfg.reader_options())
    frame[["text", "label"]].astype({"label": str}).to_json(
        out, orient="records", lines=True, force_ascii=False
    )
    return out


def stage_source(dest: str | Path) -> Path:
    """``dest`` (the job's ``source_dir``) with ``pt2aws``, ``train_entry.py``, requirements."""
    import pt2aws

    dest = Path(dest)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(
        Path(pt2aws.__file__).parent, dest / "pt2aws", dirs_exist_ok=True, ignore=ignore
    )
    (dest / ENTRY_SCRIPT).write_text(ENTRY_SOURCE)
    pins = ["# pinned to the versions pt2aws was tested with (torch comes with the image)"]
    for name in CONTAINER_REQUIREMENTS:
        with contextlib.suppress(metadata.PackageNotFoundError):
            name = f"{name}=={metadata.version(name)}"
        pins.append(name)
    (dest / "requirements.txt").write_text("\n".join(pins) + "\n")
    return dest


@dataclasses.dataclass
class TrainingJobSpec:
    """What a job runs (``processes_per_node`` None: one per GPU; ``max_runtime_s`` caps the bill)."""

    image_uri: str
    instance_type: str
    instance_count: int
    processes_per_node: int | None
    hyperparameters: dict[str, str]
    model_channel: str | None = None
    max_runtime_s: int = DEFAULT_MAX_RUNTIME_S


def training_job_spec(cfg, *, instance_type=DEFAULT_TRAINING_INSTANCE_TYPE, instance_count=1,
                      processes_per_node=None, region="us-east-1",
                      pytorch_version=TRAINING_TORCH_VERSION,
                      max_runtime_s=DEFAULT_MAX_RUNTIME_S) -> TrainingJobSpec:  # fmt: skip
    """Image, compute and hyperparameters for ``cfg``, offline (``TrainingImageError``, ``ValueError``)."""
    if min(instance_count, processes_per_node or 1, max_runtime_s) < 1:
        raise ValueError(
            f"instance_count ({instance_count}), processes_per_node ({processes_per_node}) and "
            f"max_runtime_s ({max_runtime_s}) must be >= 1"
        )
    overrides, model_dir = container_overrides(
        cfg, SM_CHANNEL_ROOT, SM_MODEL_DIR, SM_CHECKPOINT_DIR
    )
    return TrainingJobSpec(
        image_uri=training_image_uri(instance_type, region, pytorch_version),
        instance_type=instance_type, instance_count=instance_count,
        processes_per_node=processes_per_node,
        hyperparameters=hyperparameters_from_config(cfg, **overrides),
        model_channel=model_dir, max_runtime_s=max_runtime_s,
    )  # fmt: skip


def model_trainer(spec: TrainingJobSpec, *, role_arn, session, bucket, source_dir, base_job_name):
    """The SDK v3 ``ModelTrainer`` for ``spec`` (``session``: a ``boto3.Session``; nothing sent)."""
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
        environment={"TOKENIZERS_PARALLELISM": "false", "HF_HUB_DISABLE_TELEMETRY": "1"},
        stopping_condition=StoppingCondition(max_runtime_in_seconds=spec.max_runtime_s),
        output_data_config=OutputDataConfig(s3_output_path=f"s3://{bucket}/{base_job_name}"),
        # S3 prefix defaults to <base_job_name>/<job>/checkpoints
        checkpoint_config=CheckpointConfig(local_path=SM_CHECKPOINT_DIR),
    )


def training_cost_bound(instance_type: str, instance_count: int, max_runtime_s: int,
                        region: str = "us-east-1") -> dict:  # fmt: skip
    """Max runtime x instances x hourly price: ``{"usd", "price_verified", "price", "formula"}``."""
    hours = max_runtime_s / 3600
    usd, price = instance_cost(instance_type, "training", hours, instance_count, region)
    return {
        "usd": usd, "price_verified": bool(price and price.verified),  # usd None: no price
        "price": price.describe() if price else "no price in pt2aws/sizing/instances.json",
        "formula": f"{hours:g} h x {instance_count} x "
        + (f"{price.usd_per_hour:g} USD/h" if price else "(no price known)"),
    }  # fmt: skip


def launch_on(session, cfg, *, work_dir, bucket=None, base_job_name="pt2aws-train", **spec_kwargs):
    """Create a job running ``cfg`` (code and data staged under ``work_dir``, sent to ``s3://<bucket
    >/<base_job_name>/``); ``{"target", "region", "name", "spec", "model_artifact_s3", "status",
    "cost_bound"}``; ``RoleError``, ``TrainingImageError``, ``ValueError`` before any AWS call."""
    from botocore.exceptions import ClientError
    from sagemaker.train.configs import InputData

    from pt2aws.aws.session import default_bucket, explain

    role_arn = session.require_role()
    spec = training_job_spec(cfg, region=session.region, **spec_kwargs)
    source_dir = stage_source(Path(work_dir) / "code")
    data_file = prepare_data(cfg, Path(work_dir) / "data")
    bucket = bucket or default_bucket(session)
    trainer = model_trainer(spec, role_arn=role_arn, session=session.boto(), bucket=bucket,
                            source_dir=source_dir, base_job_name=base_job_name)  # fmt: skip
    channels = [InputData(channel_name=DATA_CHANNEL, data_source=str(data_file))]
    if spec.model_channel:
        channels.append(InputData(channel_name=MODEL_CHANNEL, data_source=spec.model_channel))
    try:
        trainer.train(input_data_config=channels, wait=False, logs=False)
    except ClientError as err:  # a role the caller may not pass, no quota: one line
        raise (explain(err, session.region) or err) from err
    # output_data is documented as <output path>/<job name>/output/output.tar.gz
    name = trainer.output_data.rstrip("/").split("/")[-3]
    status = job_status(get_job(session, name))
    return {
        "target": session.target, "region": session.region, "name": name,
        "spec": dataclasses.asdict(spec),
        "model_artifact_s3": status["model_artifact_s3"]
        or f"s3://{bucket}/{base_job_name}/{name}/output/model.tar.gz",
        "status": status["status"],
        "cost_bound": training_cost_bound(spec.instance_type, spec.instance_count,
                                          spec.max_runtime_s, session.region),
    }  # fmt: skip


def job_status(job) -> dict:
    """An SDK ``TrainingJob``'s name, status, reason, compute and model (None: not set)."""
    compute = job.resource_config
    return {
        "name": job.training_job_name, "status": job.training_job_status,
        "failure_reason": job.failure_reason or None,
        "instance_type": compute.instance_type, "instance_count": compute.instance_count,
        "model_artifact_s3": getattr(job.model_artifacts, "s3_model_artifacts", None),
    }  # fmt: skip


def get_job(session, name: str):
    """The SDK ``TrainingJob`` called ``name`` (``DescribeTrainingJob``)."""
    from sagemaker.core.resources import TrainingJob

    return TrainingJob.get(training_job_name=name, **session.sdk)


def wait_for_job(session, name: str, *, timeout_s: int = 4 * 3600) -> dict:
    """``TrainingJob.wait``, one plain line, :func:`job_status` once ``Completed``;
    ``TrainingJobError``: ``Failed`` or ``Stopped``; ``TimeoutError``: still running."""
    from sagemaker.core.utils.exceptions import FailedStatusError, TimeoutExceededError

    started, job = time.monotonic(), get_job(session, name)
    try:
        job.wait(poll=session.poll_s, timeout=max(1, int(timeout_s)))
    except TimeoutExceededError:
        raise TimeoutError(
            f"training job {name} still {job.training_job_status} after {timeout_s:g} s; it keeps "
            "running (stop_job stops it)"
        ) from None
    except FailedStatusError:
        pass  # reported below with SageMaker's reason
    status = job.training_job_status
    print(f"training job {name}: {status} after {time.monotonic() - started:.0f} s")
    if status != "Completed":
        logs = f"CloudWatch /aws/sagemaker/TrainingJobs, stream {name}/..."
        raise TrainingJobError(
            f"training job {name} is {status}: {job.failure_reason or 'stopped'} (logs: {logs})"
        )
    return job_status(job)


def stop_job(session, name: str) -> dict:
    """``TrainingJob.stop``; :func:`job_status` right after (``ClientError``: not running)."""
    job = get_job(session, name)
    job.stop()
    return job_status(job.refresh())


def fetch_model(session, model_artifact_s3: str, dest: str | Path) -> dict:
    """Extract the job's ``model.tar.gz`` into ``dest``, each top-level entry replacing its
    namesake: ``{"s3", "dest", "bytes", "files"}``; ``FileNotFoundError``, ``ValueError``."""
    from botocore.exceptions import ClientError

    dest = Path(dest)
    bucket, key = model_artifact_s3.removeprefix("s3://").split("/", 1)
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=dest.parent, prefix=".fetch-") as tmp:
        archive, extracted = Path(tmp) / "model.tar.gz", Path(tmp) / "extracted"
        try:
            session.client("s3").download_file(bucket, key, str(archive))
        except ClientError as err:
            raise FileNotFoundError(
                f"no model at {model_artifact_s3} ({err.response['Error']['Code']}): "
                "SageMaker writes it when the job completes; wait_for_job first"
            ) from None
        with tarfile.open(archive, "r:gz") as tar:
            tar.extractall(extracted, filter="data")
        if not (extracted / "model" / "config.json").is_file():
            raise ValueError(
                f"{model_artifact_s3} has no model/config.json: not the output of pt2aws.train"
            )
        files = sorted(str(p.relative_to(extracted)) for p in extracted.rglob("*") if p.is_file())
        dest.mkdir(parents=True, exist_ok=True)
        for entry in extracted.iterdir():
            target = dest / entry.name
            if target.is_dir() and not target.is_symlink():
                shutil.rmtree(target)
            target.unlink(missing_ok=True)
            shutil.move(entry, target)
        size = archive.stat().st_size
    return {"s3": model_artifact_s3, "dest": str(dest), "bytes": size, "files": files}
