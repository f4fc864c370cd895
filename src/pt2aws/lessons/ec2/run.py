"""The source blog's EC2 route, hands-on: train inside the AWS training DLC on a DLAMI instance.

After the launch plan (:mod:`pt2aws.lessons.ec2.plan`: a GPU instance from the Deep Learning AMI,
which brings the NVIDIA driver, Docker and the NVIDIA container toolkit), three steps run on the
instance, all built here and sent through SSM Run Command (``AWS-RunShellScript``), so no SSH
key or open port is needed:

1. fetch the *bundle* from S3: the ``pt2aws`` package with its pinned ``requirements.txt``, the
   prepared data and (for a local model folder) the model, exactly what a SageMaker training
   job gets as channels (:mod:`pt2aws.aws.training_inputs`);
2. log in to the DLC registry (``aws ecr get-login-password | docker login``) and pull the
   training DLC (:func:`pt2aws.aws.training_images.ec2_training_image_uri`);
3. ``docker run --gpus all --ipc host --network host -v <bundle>:/workspace <dlc> ... torchrun
   --nproc_per_node <GPUs> -m pt2aws.train ...`` (host IPC: the data loader and NCCL share
   memory between processes; host network: the rendezvous and EFA between nodes), then upload
   the run folder as ``model.tar.gz``, which
   :func:`pt2aws.aws.training_status.fetch_model` brings into the run folder like a SageMaker
   job's.

The instance needs an instance profile allowing SSM (``AmazonSSMManagedInstanceCore``), ECR
pulls and S3 read/write on the bucket (``ec2_plan.run_instances_request(instance_profile=...)``).
DLC flags: aws/deep-learning-containers ``docs/pytorch/deployment/ec2.md`` (stored snapshot).
"""

from __future__ import annotations

import logging
import shlex
import tarfile
from pathlib import Path

from pt2aws.aws.images import EC2_DLC_VERSION, dlc_registry, training_image_for
from pt2aws.aws.training_job import (
    DATA_CHANNEL,
    MODEL_CHANNEL,
    container_overrides,
    hyperparameters_from_config,
    prepare_data,
    stage_source,
)
from pt2aws.sizing.catalog import get_instance

logger = logging.getLogger(__name__)

#: Folder on the instance that holds the bundle, mounted as /workspace in the container.
HOST_DIR = "/opt/pt2aws"
CONTAINER_DIR = "/workspace"
SSM_DOCUMENT = "AWS-RunShellScript"
#: Rendezvous port of multi-node torchrun (c10d) on the first node.
RDZV_PORT = 29500


def stage_bundle(cfg, work_dir: str | Path) -> Path:
    """``<work_dir>/bundle.tar.gz``: ``code/`` (package, requirements), ``train/data.jsonl`` and,
    for a local model folder, ``model/``.

    Returns:
        The bundle's path.
    """
    from pt2aws.aws.training_job import DATA_FILE

    work_dir = Path(work_dir)
    code = stage_source(work_dir / "code")
    data = prepare_data(cfg, work_dir / DATA_CHANNEL)
    _, model_dir = container_overrides(cfg, CONTAINER_DIR, "", "")
    bundle = work_dir / "bundle.tar.gz"
    with tarfile.open(bundle, "w:gz") as tar:
        tar.add(code, arcname="code")
        tar.add(data, arcname=f"{DATA_CHANNEL}/{DATA_FILE}")
        if model_dir:
            tar.add(model_dir, arcname=MODEL_CHANNEL)
    return bundle


def torchrun_args(cfg, *, nproc_per_node: int, nodes: int = 1, head_address: str = "") -> list:
    """``torchrun ... -m pt2aws.train --<field> <value> ...`` with container paths.

    Args:
        cfg: the :class:`pt2aws.config.TrainConfig` to run.
        nproc_per_node: processes per instance (one per GPU).
        nodes: instances; more than 1 needs ``head_address``.
        head_address: private IP or DNS name of the first instance (the rendezvous).

    Returns:
        The command as a list of strings.

    Raises:
        ValueError: ``nodes`` > 1 without ``head_address``, or counts below 1.
    """
    if nproc_per_node < 1 or nodes < 1:
        raise ValueError(f"nproc_per_node ({nproc_per_node}) and nodes ({nodes}) must be >= 1")
    overrides, _ = container_overrides(
        cfg, CONTAINER_DIR, f"{CONTAINER_DIR}/output/train", f"{CONTAINER_DIR}/output/checkpoints"
    )
    command = ["torchrun", "--nproc_per_node", str(nproc_per_node)]
    if nodes > 1:
        if not head_address:
            raise ValueError(f"{nodes} nodes need head_address (the first instance's private IP)")
        command += ["--nnodes", str(nodes), "--rdzv_id", "pt2aws", "--rdzv_backend", "c10d"]
        command += ["--rdzv_endpoint", f"{head_address}:{RDZV_PORT}"]
    command += ["-m", "pt2aws.train"]
    for key, value in hyperparameters_from_config(cfg, **overrides).items():
        command += [f"--{key}", value]
    return command


def docker_run_command(image_uri: str, train_command: list[str], *, gpu: bool, efa: bool) -> str:
    """The ``docker run`` line: GPUs, host IPC and network, the bundle at /workspace.

    Inside: install the pinned requirements (torch comes with the image), then ``train_command``
    with ``PYTHONPATH`` pointing at the bundled package.
    """
    inner = (
        f"pip install --no-cache-dir -r {CONTAINER_DIR}/code/requirements.txt && "
        f"PYTHONPATH={CONTAINER_DIR}/code {shlex.join(train_command)}"
    )
    flags = ["--rm", "--ipc", "host", "--network", "host"]
    if gpu:
        flags[1:1] = ["--gpus", "all"]
    if efa:  # the EFA devices and the NCCL OFI plugin (DLC docs: --privileged or --device)
        flags += ["--privileged", "-e", "FI_PROVIDER=efa"]
    flags += ["-v", f"{HOST_DIR}:{CONTAINER_DIR}", "-w", CONTAINER_DIR]
    flags += ["-e", "TOKENIZERS_PARALLELISM=false", "-e", "HF_HUB_DISABLE_TELEMETRY=1"]
    return shlex.join(["docker", "run", *flags, image_uri, "bash", "-c", inner])


def training_commands(
    instance_type: str,
    cfg,
    *,
    region: str,
    bundle_s3: str,
    output_s3: str,
    nodes: int = 1,
    head_address: str = "",
    dlc_version: str = EC2_DLC_VERSION,
) -> list[str]:
    """The shell lines SSM runs on the instance (as root, ``AWS-RunShellScript``).

    Args:
        instance_type: EC2 name from the catalog (``ml.`` prefix accepted).
        cfg: the :class:`pt2aws.config.TrainConfig` to run.
        region: the instance's region (ECR login, S3).
        bundle_s3: where :func:`stage_bundle`'s archive was uploaded.
        output_s3: where the run folder goes, ``.../model.tar.gz``.
        nodes: instances; every one runs the same lines.
        head_address: first instance's private IP (``nodes`` > 1).
        dlc_version: PyTorch minor version of the training DLC.

    Returns:
        One command per line; the first is ``set -euo pipefail``.

    Raises:
        pt2aws.aws.training_images.TrainingImageError: an arm64 CPU instance (AWS publishes no
            arm64 CPU training DLC) or an unknown DLC version.
        KeyError: an instance type not in the catalog.
    """
    it = get_instance(instance_type)
    image, gpu = training_image_for(it.name, region, dlc_version)
    train = torchrun_args(cfg, nproc_per_node=it.devices, nodes=nodes, head_address=head_address)
    docker = docker_run_command(image, train, gpu=gpu, efa=it.efa and nodes > 1)
    lines = ["set -euo pipefail", f"mkdir -p {HOST_DIR} && cd {HOST_DIR}"]
    if not gpu:  # the Amazon Linux 2023 AMI of CPU instances has no Docker (the DLAMI has)
        lines.append("command -v docker || (dnf install -y docker && systemctl start docker)")
    lines += [
        f"aws s3 cp {shlex.quote(bundle_s3)} bundle.tar.gz --region {region}",
        "rm -rf code train model output && tar -xzf bundle.tar.gz",
        f"aws ecr get-login-password --region {region} | docker login --username AWS "
        f"--password-stdin {dlc_registry(region)}",
        f"docker pull {image}",
        docker,
        "tar -czf model.tar.gz -C output/train .",
        f"aws s3 cp model.tar.gz {shlex.quote(output_s3)} --region {region}",
    ]
    return lines


def send_commands(
    session,
    instance_ids: list[str],
    commands: list[str],
    *,
    execution_timeout_s: int = 8 * 3600,
    comment: str = "pt2aws: torchrun -m pt2aws.train in the AWS training DLC",
    output_bucket: str = "",
    output_prefix: str = "",
) -> dict:
    """Send ``commands`` to ``instance_ids`` with SSM Run Command (``AWS-RunShellScript``).

    Args:
        session: where the instances are (:class:`pt2aws.aws.session.AwsSession`).
        instance_ids: the instances (SSM-managed: agent running, instance profile allowing SSM).
        commands: the lines to run (:func:`training_commands`).
        execution_timeout_s: SSM stops the script after this many seconds.
        comment: shown in the SSM console (100 characters at most).
        output_bucket, output_prefix: where SSM writes the full stdout / stderr (the API's own
            copy keeps the first 24,000 characters).

    Returns:
        ``{"command_id", "instance_ids", "document", "status"}``.
    """
    request = {
        "InstanceIds": list(instance_ids),
        "DocumentName": SSM_DOCUMENT,
        "Comment": comment[:100],
        "Parameters": {"commands": commands, "executionTimeout": [str(execution_timeout_s)]},
    }
    if output_bucket:
        request.update(OutputS3BucketName=output_bucket, OutputS3KeyPrefix=output_prefix)
    sent = session.client("ssm").send_command(**request)["Command"]
    return {
        "command_id": sent["CommandId"],
        "instance_ids": sent["InstanceIds"],
        "document": sent["DocumentName"],
        "status": sent["Status"],
    }


def _upload_and_send(
    session, instance_type, cfg, bundle: Path, bucket: str, instance_ids, command_kwargs
) -> dict:
    """Upload the bundle, build the commands, send them; the S3 locations and SSM's answer."""
    from pt2aws.aws.artifact import upload_archive
    from pt2aws.aws.session import default_bucket, resource_name

    bucket = bucket or default_bucket(session)
    prefix = f"pt2aws-ec2/{resource_name('pt2aws-ec2')}"
    output_s3 = f"s3://{bucket}/{prefix}/output/model.tar.gz"
    bundle_s3 = upload_archive(session, bundle, f"s3://{bucket}/{prefix}/bundle.tar.gz")
    commands = training_commands(
        instance_type,
        cfg,
        region=session.region,
        bundle_s3=bundle_s3,
        output_s3=output_s3,
        **command_kwargs,
    )
    ids = instance_ids or [session.emulator.launch_instance(instance_type)]
    sent = send_commands(session, ids, commands, output_bucket=bucket, output_prefix=prefix)
    return {"bundle_s3": bundle_s3, "output_s3": output_s3, "commands": commands, **sent}


def run_on(
    session,
    instance_type: str,
    cfg,
    *,
    work_dir: str | Path,
    instance_ids: list[str] | None = None,
    bucket: str = "",
    **command_kwargs,
) -> dict:
    """Train ``cfg`` on EC2 instances inside the AWS training DLC, sent through SSM Run Command.

    Stages the bundle (:func:`stage_bundle`), uploads it to
    ``s3://<bucket>/pt2aws-ec2/<name>/bundle.tar.gz``, builds :func:`training_commands` and sends
    them (:func:`send_commands`). The run folder will be at ``.../<name>/output/model.tar.gz``:
    follow the command with SSM's ``GetCommandInvocation`` (``aws ssm get-command-invocation
    --command-id ... --instance-id ...``), then :func:`pt2aws.aws.training_status.fetch_model`.

    Args:
        session: where to send them (:class:`pt2aws.aws.session.AwsSession`): your account
            (your instances: the training runs and is billed at their EC2 rate) or the emulator
            (an emulated instance receives the commands; nothing runs).
        instance_type: EC2 name of the instances (the commands depend on GPUs and EFA).
        cfg: the :class:`pt2aws.config.TrainConfig` to run.
        work_dir: local scratch folder for the bundle.
        instance_ids: the running, SSM-managed instances; on the emulator default one emulated
            instance.
        bucket: S3 bucket; default ``sagemaker-<region>-<account>``.
        **command_kwargs: :func:`training_commands`'s ``nodes``, ``head_address``,
            ``dlc_version``.

    Returns:
        ``{"target", "region", "instance_type", "image_uri", "bundle_s3", "output_s3",
        "commands", "command_id", "instance_ids", "document", "status"}``.

    Raises:
        ValueError: an AWS session without ``instance_ids``; see :func:`torchrun_args`.
        pt2aws.aws.training_images.TrainingImageError: see :func:`training_commands` (before
            any AWS call).
    """
    if not session.emulated and not instance_ids:
        raise ValueError(
            "AWS_TARGET='aws' needs instance_ids: launch the instances from the launch plan "
            "(notebook 00: DLAMI, instance profile with SSM, ECR read and S3 access) first"
        )
    dlc_version = command_kwargs.get("dlc_version", EC2_DLC_VERSION)
    image, _ = training_image_for(get_instance(instance_type).name, session.region, dlc_version)
    bundle = stage_bundle(cfg, work_dir)
    sent = _upload_and_send(
        session, instance_type, cfg, bundle, bucket, instance_ids, command_kwargs
    )
    return {
        "target": session.target,
        "region": session.region,
        "instance_type": instance_type,
        "image_uri": image,
        **sent,
    }
