"""The source blog's EC2 route: train inside the AWS training DLC on a DLAMI instance, the
commands sent through SSM Run Command (no SSH key, no open port). The instance fetches the bundle
(package, requirements, data, a local model), pulls the DLC, runs ``torchrun`` in it and uploads
the run folder as ``model.tar.gz`` (DLC flags: aws/deep-learning-containers
``docs/pytorch/deployment/ec2.md``)."""

from __future__ import annotations

import shlex
import tarfile
from pathlib import Path

from pt2aws.aws.images import EC2_DLC_VERSION, dlc_registry, training_image_for
from pt2aws.aws.training_job import (
    DATA_CHANNEL,
    DATA_FILE,
    MODEL_CHANNEL,
    container_overrides,
    hyperparameters_from_config,
    prepare_data,
    stage_source,
)
from pt2aws.sizing.catalog import get_instance
from pt2aws.train.launch import config_to_args

HOST_DIR = "/opt/pt2aws"
CONTAINER_DIR = "/workspace"
SSM_DOCUMENT = "AWS-RunShellScript"
#: Rendezvous port of multi-node torchrun (c10d) on the first node.
RDZV_PORT = 29500


def stage_bundle(cfg, work_dir: str | Path) -> Path:
    """``<work_dir>/bundle.tar.gz``: ``code/``, ``train/data.jsonl`` and a local ``model/``."""
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


def torchrun_args(cfg, *, nproc_per_node: int, nodes: int = 1, head_address: str = "") -> list[str]:
    """``torchrun ... -m pt2aws.train --<field> <value> ...`` with the container's paths.
    Raises ValueError: counts below 1, or ``nodes`` > 1 without ``head_address``."""
    if nproc_per_node < 1 or nodes < 1:
        raise ValueError(f"nproc_per_node ({nproc_per_node}) and nodes ({nodes}) must be >= 1")
    output = f"{CONTAINER_DIR}/output"
    overrides, _ = container_overrides(
        cfg, CONTAINER_DIR, f"{output}/train", f"{output}/checkpoints"
    )
    command = ["torchrun", "--nproc_per_node", str(nproc_per_node)]
    if nodes > 1:
        if not head_address:
            raise ValueError(f"{nodes} nodes need head_address (the first instance's private IP)")
        command += ["--nnodes", str(nodes), "--rdzv_id", "pt2aws", "--rdzv_backend", "c10d"]
        command += ["--rdzv_endpoint", f"{head_address}:{RDZV_PORT}"]
    train_args = config_to_args(**hyperparameters_from_config(cfg, **overrides))
    return [*command, "-m", "pt2aws.train", *train_args]


def docker_run_command(image_uri: str, train_command: list[str], *, gpu: bool, efa: bool) -> str:
    """``docker run`` of the DLC: requirements installed, then ``train_command``."""
    inner = (
        f"pip install --no-cache-dir -r {CONTAINER_DIR}/code/requirements.txt && "
        f"PYTHONPATH={CONTAINER_DIR}/code {shlex.join(train_command)}"
    )
    flags = ["--rm", *(["--gpus", "all"] if gpu else []), "--ipc", "host", "--network", "host"]
    if efa:  # the EFA devices and the NCCL OFI plugin (DLC docs)
        flags += ["--privileged", "-e", "FI_PROVIDER=efa"]
    flags += ["-v", f"{HOST_DIR}:{CONTAINER_DIR}", "-w", CONTAINER_DIR]
    flags += ["-e", "TOKENIZERS_PARALLELISM=false", "-e", "HF_HUB_DISABLE_TELEMETRY=1"]
    return shlex.join(["docker", "run", *flags, image_uri, "bash", "-c", inner])


def training_commands(
    instance_type, cfg, *, region, bundle_s3, output_s3, nodes=1, head_address=""
) -> list[str]:
    """The lines SSM runs as root on every instance: fetch the bundle, pull and run the DLC,
    upload ``output/train`` to ``output_s3``. Raises TrainingImageError (an arm64 CPU
    instance) or KeyError (a type not in the catalog)."""
    it = get_instance(instance_type)
    image, gpu = training_image_for(it.name, region, EC2_DLC_VERSION)
    train = torchrun_args(cfg, nproc_per_node=it.devices, nodes=nodes, head_address=head_address)
    lines = ["set -euo pipefail", f"mkdir -p {HOST_DIR} && cd {HOST_DIR}"]
    if not gpu:  # the Amazon Linux 2023 AMI of CPU instances has no Docker (the DLAMI has)
        lines.append("command -v docker || (dnf install -y docker && systemctl start docker)")
    return lines + [
        f"aws s3 cp {shlex.quote(bundle_s3)} bundle.tar.gz --region {region}",
        "rm -rf code train model output && tar -xzf bundle.tar.gz",
        f"aws ecr get-login-password --region {region} | docker login --username AWS "
        f"--password-stdin {dlc_registry(region)}",
        f"docker pull {image}",
        docker_run_command(image, train, gpu=gpu, efa=it.efa and nodes > 1),
        "tar -czf model.tar.gz -C output/train .",
        f"aws s3 cp model.tar.gz {shlex.quote(output_s3)} --region {region}",
    ]


def run_on(session, instance_type, cfg, *, work_dir, instance_ids=None) -> dict:
    """Upload the bundle to ``s3://<default bucket>/pt2aws-ec2/<name>/`` and send
    :func:`training_commands` to ``instance_ids`` (on the emulator: one emulated instance, which
    runs nothing); full output to S3 (the API keeps 24,000 characters). Raises ValueError: an
    AWS session without ``instance_ids``; TrainingImageError, before any AWS call."""
    from pt2aws.aws.artifact import upload_archive
    from pt2aws.aws.session import default_bucket, resource_name

    if not session.emulated and not instance_ids:
        raise ValueError(
            "AWS_TARGET='aws' needs instance_ids: launch the instances from the launch plan "
            "(notebook 00: DLAMI, instance profile with SSM, ECR read and S3 access) first"
        )
    image, _ = training_image_for(get_instance(instance_type).name, session.region, EC2_DLC_VERSION)
    bucket = default_bucket(session)
    prefix = f"pt2aws-ec2/{resource_name('pt2aws-ec2')}"
    bundle = stage_bundle(cfg, work_dir)
    bundle_s3 = upload_archive(session, bundle, f"s3://{bucket}/{prefix}/bundle.tar.gz")
    output_s3 = f"s3://{bucket}/{prefix}/output/model.tar.gz"
    where = {"region": session.region, "bundle_s3": bundle_s3, "output_s3": output_s3}
    commands = training_commands(instance_type, cfg, **where)
    sent = session.client("ssm").send_command(
        InstanceIds=instance_ids or [session.emulator.launch_instance(instance_type)],
        DocumentName=SSM_DOCUMENT,
        Comment="pt2aws: torchrun -m pt2aws.train in the AWS training DLC",
        Parameters={"commands": commands, "executionTimeout": [str(8 * 3600)]},
        OutputS3BucketName=bucket,
        OutputS3KeyPrefix=prefix,
    )["Command"]
    return where | {
        "target": session.target,
        "instance_type": instance_type,
        "image_uri": image,
        "commands": commands,
        "command_id": sent["CommandId"],
        "instance_ids": sent["InstanceIds"],
        "document": sent["DocumentName"],
        "status": sent["Status"],
    }
