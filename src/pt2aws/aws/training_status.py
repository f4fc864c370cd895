"""Follow a SageMaker training job after launch: status, wait, stop, and bring its model home.

Each function takes the :class:`pt2aws.aws.session.AwsSession` the job was launched with
(:func:`pt2aws.aws.training_job.launch_on`), so a notebook cell is one call.

* :func:`job_status`: ``DescribeTrainingJob`` in a few fields, with what the job has cost so far
  (billable seconds x instances x the catalog's hourly price).
* :func:`wait_for_job`: poll until ``Completed`` with a progress bar and a timeout.
* :func:`stop_job`: ``StopTrainingJob`` (SageMaker then uploads what ``/opt/ml/model`` holds).
* :func:`fetch_model`: download the job's ``model.tar.gz`` and extract it into the run folder's
  ``train/``, where notebooks 02 and 03 read the model (``model/``) and its metrics.
"""

from __future__ import annotations

import shutil
import tarfile
import tempfile
from pathlib import Path

from pt2aws.aws.waiting import wait_for_status

#: States after which a training job does not change any more.
TERMINAL_STATES = ("Completed", "Failed", "Stopped")


class TrainingJobError(RuntimeError):
    """The training job failed or was stopped (the message carries SageMaker's reason)."""


def _summary(described: dict, region: str) -> dict:
    from pt2aws.sizing import pricing

    resources = described.get("ResourceConfig", {})
    instance_type = resources.get("InstanceType", "")
    count = resources.get("InstanceCount", 1)
    billable_s = described.get("BillableTimeInSeconds")
    price = pricing.price(instance_type, "training", region) if instance_type else None
    return {
        "name": described["TrainingJobName"],
        "status": described["TrainingJobStatus"],
        "secondary_status": described.get("SecondaryStatus"),
        "failure_reason": described.get("FailureReason"),
        "instance_type": instance_type,
        "instance_count": count,
        "max_runtime_s": described.get("StoppingCondition", {}).get("MaxRuntimeInSeconds"),
        "billable_s": billable_s,
        "billed_usd": round(billable_s * count * price.usd_per_hour / 3600, 4)
        if billable_s is not None and price
        else None,
        "model_artifact_s3": described.get("ModelArtifacts", {}).get("S3ModelArtifacts"),
    }


def job_status(session, name: str) -> dict:
    """The job's state now.

    Returns:
        ``{"name", "status", "secondary_status", "failure_reason", "instance_type",
        "instance_count", "max_runtime_s", "billable_s", "billed_usd", "model_artifact_s3"}``;
        ``billed_usd`` (billable seconds x instances x the catalog's UNVERIFIED hourly price) is
        None until SageMaker reports billable time or when no price is known.

    Raises:
        botocore.exceptions.ClientError: no such job (``ValidationException``).
    """
    described = session.client("sagemaker").describe_training_job(TrainingJobName=name)
    return _summary(described, session.region)


def wait_for_job(
    session,
    name: str,
    *,
    timeout_s: float = 4 * 3600,
    poll_s: float | None = None,
    progress: bool = True,
) -> dict:
    """Poll until the job is ``Completed``, showing its status and the elapsed seconds.

    Args:
        session: where the job runs (:class:`pt2aws.aws.session.AwsSession`).
        name: the training job.
        timeout_s: give up waiting (the job keeps running) after this many seconds.
        poll_s: seconds between polls; default the session's (15 on AWS).
        progress: show a tqdm bar with the status.

    Returns:
        :func:`job_status`'s fields once ``Completed``.

    Raises:
        TrainingJobError: the job ``Failed`` or was ``Stopped``.
        TimeoutError: still running after ``timeout_s`` (it is not stopped: see :func:`stop_job`).
    """
    sm = session.client("sagemaker")
    described = wait_for_status(
        lambda: sm.describe_training_job(TrainingJobName=name),
        status_key="TrainingJobStatus",
        done=("Completed",),
        failed=("Failed", "Stopped"),
        label=f"training job {name}",
        timeout_s=timeout_s,
        poll_s=poll_s or min(session.poll_s, timeout_s / 4),
        progress=progress,
        failure=TrainingJobError,
        hint=f" (logs: CloudWatch /aws/sagemaker/TrainingJobs, stream {name}/...)",
    )
    return _summary(described, session.region)


def stop_job(session, name: str) -> dict:
    """Stop a running job (``StopTrainingJob``); billing ends when it reaches ``Stopped``.

    Returns:
        :func:`job_status`'s fields right after the request (``Stopping`` or ``Stopped``).

    Raises:
        botocore.exceptions.ClientError: the job is not running (``ValidationException``).
    """
    sm = session.client("sagemaker")
    sm.stop_training_job(TrainingJobName=name)
    return _summary(sm.describe_training_job(TrainingJobName=name), session.region)


def _replace_into(source: Path, dest: Path) -> None:
    """Move every entry of ``source`` into ``dest``, replacing entries of the same name."""
    dest.mkdir(parents=True, exist_ok=True)
    for entry in source.iterdir():
        target = dest / entry.name
        if target.is_dir() and not target.is_symlink():
            shutil.rmtree(target)
        elif target.exists() or target.is_symlink():
            target.unlink()
        shutil.move(str(entry), str(target))


def fetch_model(session, model_artifact_s3: str, dest: str | Path) -> dict:
    """Download the job's ``model.tar.gz`` and extract it into ``dest`` (the run's ``train/``).

    The archive is extracted with ``tarfile``'s ``data`` filter (no absolute paths, no links out
    of ``dest``, no device files) into a temporary folder beside ``dest`` first; then each of its
    top-level entries replaces the entry of the same name in ``dest`` (``model/``,
    ``metrics.json``, ``train_log.jsonl`` ...). Other entries of ``dest`` are kept.

    Args:
        session: where the bucket is (:class:`pt2aws.aws.session.AwsSession`).
        model_artifact_s3: ``s3://<bucket>/<prefix>/<job>/output/model.tar.gz``.
        dest: the folder to fill, e.g. ``RunDir(...).train_dir``.

    Returns:
        ``{"s3": str, "dest": str, "bytes": int (archive size), "files": [relative paths]}``.

    Raises:
        FileNotFoundError: no object at ``model_artifact_s3`` (the job has not finished).
        ValueError: the archive has no ``model/config.json`` (not a ``pt2aws.train`` run).
    """
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
        size = archive.stat().st_size
        _replace_into(extracted, dest)
    return {"s3": model_artifact_s3, "dest": str(dest), "bytes": size, "files": files}
