"""Notebook 00's EC2 route (the source blog's): the launch plan (the AMI from its public SSM
parameter, ``RunInstances`` and its ``DryRun``: permissions and request, not capacity or quota;
the SageMaker settings; nothing starts), then training in the AWS training DLC there, sent
through SSM Run Command (DLC flags: aws/deep-learning-containers ``docs/pytorch/deployment``)."""

from __future__ import annotations

import contextlib
import shlex
import tarfile
from pathlib import Path

from pt2aws.aws import images, training_job
from pt2aws.aws.deploy import endpoint_environment
from pt2aws.sizing import catalog
from pt2aws.train.launch import config_to_args

HOST_DIR = "/opt/pt2aws"
CONTAINER_DIR = "/workspace"


class LaunchPlanError(ValueError):
    """A launch plan cannot be built; the message names the problem and the fix."""


def lookup_ami(session, parameter: str) -> str:
    """The AMI ID in the public SSM ``parameter``. Raises LaunchPlanError: none, or denied."""
    from botocore.exceptions import ClientError

    try:
        return session.client("ssm").get_parameter(Name=parameter)["Parameter"]["Value"]
    except ClientError as exc:
        code = exc.response["Error"]["Code"]
    if code == "ParameterNotFound":
        raise LaunchPlanError(
            f"SSM parameter {parameter} not found in {session.region}: the DLAMI version or OS "
            "may be retired; list current ones with `aws ssm get-parameters-by-path --path "
            "/aws/service/deeplearning/ami/x86_64 --recursive`"
        )
    raise LaunchPlanError(f"reading {parameter} failed ({code}): allow ssm:GetParameter")


def run_instances_request(instance_type: str, image_id: str, count=1, *, name="pt2aws-train"):
    """Keyword arguments of ``ec2.run_instances``: IMDSv2, a 200 GB gp3 root volume, a ``Name``
    tag; ``count`` > 1 EFA instances get an EFA interface in ``subnet-REPLACE`` (the reader's:
    one subnet, one AZ, a security group open to itself) and a placement group
    ``<name>-cluster``. Raises LaunchPlanError: a type EC2 does not know."""
    bare = instance_type.removeprefix("ml.")
    if not catalog.availability(bare)["ec2"]:
        raise LaunchPlanError(
            f"EC2 has no InstanceType {bare!r}: use the EC2 name, e.g. p4d.24xlarge"
        )
    row = catalog.find(bare)
    neuron = row is not None and row.kind in ("trainium", "inferentia")
    volume = {"VolumeSize": 200, "VolumeType": "gp3", "DeleteOnTermination": True}
    request = {
        "ImageId": image_id, "InstanceType": bare, "MinCount": count, "MaxCount": count,
        "BlockDeviceMappings": [  # Ubuntu (Neuron DLAMI) / Amazon Linux root device
            {"DeviceName": "/dev/sda1" if neuron else "/dev/xvda", "Ebs": volume}],
        "TagSpecifications": [
            {"ResourceType": "instance", "Tags": [{"Key": "Name", "Value": name}]}],
        "MetadataOptions": {"HttpTokens": "required"},
    }  # fmt: skip
    if row is not None and row.efa and count > 1:
        efa = {"DeviceIndex": 0, "InterfaceType": "efa", "SubnetId": "subnet-REPLACE"}
        request["NetworkInterfaces"] = [efa | {"Groups": [], "DeleteOnTermination": True}]
        request["Placement"] = {"GroupName": f"{name}-cluster"}
    return request


def dry_run(session, request: dict) -> dict:
    """``{"would_succeed", "code", "message"}`` of ``request`` sent with ``DryRun=True``.
    Raises LaunchPlanError: the endpoint launched instances instead."""
    from botocore.exceptions import ClientError

    try:
        session.client("ec2").run_instances(DryRun=True, **request)
    except ClientError as exc:
        err = exc.response["Error"]
        ok = err["Code"] == "DryRunOperation"
        return {"would_succeed": ok, "code": err["Code"], "message": err.get("Message", "")}
    raise LaunchPlanError("EC2 launched instances instead of a dry run: terminate them")


def launch_plan(
    train_instance, nodes=1, serve_instance="c7g.xlarge", *, session=None, region="us-east-1"
):
    """Everything to train on ``nodes`` x ``train_instance`` and serve on ``serve_instance``;
    ``session``: where to read the AMI and dry-run the request (None: no AWS call)."""
    it, serve = catalog.get_instance(train_instance), f"ml.{serve_instance.removeprefix('ml.')}"
    region, trainer = session.region if session else region, f"ml.{it.name}"
    neuron = it.kind in ("trainium", "inferentia")  # no training DLC here for Neuron
    with images.reported_by_caller():  # the plan's "support" rows carry each notice
        parameter = images.dlami_parameter(it.name)
        ami = lookup_ami(session, parameter) if session else None
        request = run_instances_request(it.name, ami or "ami-RESOLVE-FROM-SSM", nodes)
        dlc = training_image = None  # where no such image exists (TrainingImageError)
        with contextlib.suppress(images.TrainingImageError):
            dlc = None if neuron else images.training_image_for(it.name, region)[0]
        with contextlib.suppress(images.TrainingImageError):
            training_image = images.training_image_uri(trainer, region)
        hosting = catalog.availability(serve)["sagemaker_hosting"]
        serving_image = images.inference_image_uri(region, instance_type=serve) if hosting else None
        support = _support(it)
    return {
        "target": session.target if session else "none", "region": region,
        "train_instance": it.name, "nodes": nodes,
        "ec2": {"ssm_parameter": parameter, "ami_id": ami, "request": request,
                "dry_run": dry_run(session, request) if ami else None, "dlc_image": dlc},
        "sagemaker_training": {  # no image: not a SageMaker training type, or Neuron
            "training_image": training_image, "instance_type": trainer, "instance_count": nodes,
            "distributed": f"Torchrun(), {it.devices} process(es) per node",
        },
        "sagemaker_endpoint": {"image_uri": serving_image, "instance_type": serve,
                               "environment": endpoint_environment(serve)},
        "support": support,
        "next_steps": _next_steps(it, dlc, training_image, nodes),
    }  # fmt: skip


def _support(it) -> list[dict]:
    """Patch support of each image the plan names."""
    facts = images.FACTS["training"]["ec2"]["versions"]
    rows = [("DLAMI PyTorch", images.DLAMI_PYTORCH_VERSION)] if it.kind == "gpu" else []
    rows += [
        (facts[images.EC2_DLC_VERSION]["repository"], images.EC2_DLC_VERSION),
        ("pytorch-training", images.TRAINING_TORCH_VERSION),
        (images.ARM64_INFERENCE_IMAGES[images.INFERENCE_TORCH_VERSION]["repository"],
         images.INFERENCE_TORCH_VERSION),
    ]  # fmt: skip
    return [images.support(line, version) for line, version in rows]


def _next_steps(it, dlc: str | None, training_image: str | None, nodes: int) -> list[str]:
    """What to do with the plan's AMI, images and instance types."""
    gpus = "--gpus all " if it.kind == "gpu" else ""
    run = (
        f"pt2aws.lessons.ec2.run_on(session, ...) sends `docker run {gpus}... {dlc} torchrun "
        f"--nproc_per_node {it.devices} -m pt2aws.train ...` through SSM Run Command"
        if dlc
        else "install the project there (`make setup`) and run `python -m pt2aws.train`"
    )
    steps = [
        f"EC2: launch with an instance profile allowing SSM, ECR pulls and S3; then {run}",
        "SageMaker: ModelTrainer(training_image=..., compute=Compute(...), distributed=Torchrun())"
        " as notebook 01 does; serve with notebook 03"
        if training_image
        else "serve with notebook 03",
    ]
    if nodes > 1:  # torchrun's rendezvous; EFA needs a cluster placement group
        steps.insert(1, f"{nodes} nodes: the same command on each, with `--nnodes {nodes} "
                     "--node_rank <i> --rdzv_backend c10d --rdzv_endpoint <node 0's IP>:29400`, "
                     "in one cluster placement group (EFA)")  # fmt: skip
    if it.kind in ("trainium", "inferentia"):
        steps.insert(0, "port training to the AWS Neuron SDK (torch-neuronx) first")
    return steps


def format_launch_plan(plan: dict) -> str:
    """The plan as text."""
    ec2, tr, ep = plan["ec2"], plan["sagemaker_training"], plan["sagemaker_endpoint"]
    request, dry = ec2["request"], ec2["dry_run"]
    plain = "/ami-amazon-linux-latest/" in ec2["ssm_parameter"]  # CPU: plain Amazon Linux 2023
    efa = ", EFA interface + cluster placement group" if "NetworkInterfaces" in request else ""
    verdict = "would succeed" if dry and dry["would_succeed"] else "would FAIL"
    lines = [
        f"Launch plan: {plan['nodes']} x {plan['train_instance']} in {plan['region']}",
        f"  {'AMI (a CPU job needs no DLAMI)' if plain else 'DLAMI'}: SSM parameter "
        f"{ec2['ssm_parameter']} -> {ec2['ami_id'] or 'not resolved'}",
        f"  EC2 run_instances: {request['MinCount']} x {request['InstanceType']}, "
        f"{request['BlockDeviceMappings'][0]['Ebs']['VolumeSize']} GB gp3{efa}",
        "  dry run: " + ("not sent" if dry is None else f"{verdict} ({dry['code']})"),
        f"  SageMaker training: {tr['instance_count']} x {tr['instance_type']}, image "
        f"{tr['training_image']}; {tr['distributed']}"
        if tr["training_image"]
        else f"  SageMaker training: {tr['instance_type']} is not offered (or needs Neuron)",
        f"  SageMaker endpoint: {ep['instance_type']}, image {ep['image_uri'] or 'n/a'}",
        "  endpoint env: " + ", ".join(f"{k}={v}" for k, v in ep["environment"].items()),
        f"  EC2 training DLC: {ec2['dlc_image'] or 'none (Neuron / arm64 CPU)'}",
        "patch support:",
        *[f"  {row['message']}" for row in plan["support"]],
        "next steps:",
        *[f"  {i}. {step}" for i, step in enumerate(plan["next_steps"], 1)],
    ]
    return "\n".join(lines)


def stage_bundle(cfg, work_dir: str | Path) -> Path:
    """``<work_dir>/bundle.tar.gz``: ``code/``, ``train/data.jsonl`` and a local ``model/``."""
    work_dir = Path(work_dir)
    code = training_job.stage_source(work_dir / "code")
    data = training_job.prepare_data(cfg, work_dir / training_job.DATA_CHANNEL)
    _, model_dir = training_job.container_overrides(cfg, CONTAINER_DIR, "", "")
    bundle = work_dir / "bundle.tar.gz"
    with tarfile.open(bundle, "w:gz") as tar:
        tar.add(code, arcname="code")
        tar.add(data, arcname=f"{training_job.DATA_CHANNEL}/{training_job.DATA_FILE}")
        if model_dir:
            tar.add(model_dir, arcname=training_job.MODEL_CHANNEL)
    return bundle


def training_commands(instance_type, cfg, *, region, bundle_s3, output_s3) -> list[str]:
    """The lines SSM runs as root on the instance: fetch the bundle, pull the DLC, ``docker run``
    it with every GPU, the host's shared memory (data-loader workers, NCCL) and network, the
    requirements installed and ``torchrun`` one process per device with the container's paths;
    upload ``output/train`` to ``output_s3``. Raises TrainingImageError (an arm64 CPU instance)
    or KeyError (a type not in the catalog)."""
    it = catalog.get_instance(instance_type)
    image, gpu = images.training_image_for(it.name, region, images.EC2_DLC_VERSION)
    out = f"{CONTAINER_DIR}/output"
    overrides, _ = training_job.container_overrides(
        cfg, CONTAINER_DIR, f"{out}/train", f"{out}/checkpoints"
    )
    train = ["torchrun", "--nproc_per_node", str(it.devices), "-m", "pt2aws.train"]
    train += config_to_args(**training_job.hyperparameters_from_config(cfg, **overrides))
    inner = (
        f"pip install --no-cache-dir -r {CONTAINER_DIR}/code/requirements.txt && "
        f"PYTHONPATH={CONTAINER_DIR}/code {shlex.join(train)}"
    )
    docker = ["docker", "run", "--rm", *(["--gpus", "all"] if gpu else []), "--ipc", "host"]
    docker += ["--network", "host", "-v", f"{HOST_DIR}:{CONTAINER_DIR}", "-w", CONTAINER_DIR]
    docker += ["-e", "TOKENIZERS_PARALLELISM=false", "-e", "HF_HUB_DISABLE_TELEMETRY=1"]
    lines = ["set -euo pipefail", f"mkdir -p {HOST_DIR} && cd {HOST_DIR}"]
    if not gpu:  # the Amazon Linux 2023 AMI of CPU instances has no Docker (the DLAMI has)
        lines.append("command -v docker || (dnf install -y docker && systemctl start docker)")
    return lines + [
        f"aws s3 cp {shlex.quote(bundle_s3)} bundle.tar.gz --region {region}",
        "rm -rf code train model output && tar -xzf bundle.tar.gz",
        f"aws ecr get-login-password --region {region} | docker login --username AWS "
        f"--password-stdin {images.dlc_registry(region)}",
        f"docker pull {image}",
        shlex.join([*docker, image, "bash", "-c", inner]),
        "tar -czf model.tar.gz -C output/train .",
        f"aws s3 cp model.tar.gz {shlex.quote(output_s3)} --region {region}",
    ]


def run_on(session, instance_type, cfg, *, work_dir, instance_ids=None) -> dict:
    """Upload the bundle to ``s3://<default bucket>/pt2aws-ec2/<name>/``, send
    :func:`training_commands` to ``instance_ids`` (emulator: one emulated instance, which runs
    nothing), output to S3. ValueError: AWS without ``instance_ids``; TrainingImageError."""
    from pt2aws.aws.artifact import upload_archive
    from pt2aws.aws.session import default_bucket, resource_name

    if not session.emulated and not instance_ids:
        raise ValueError(
            "AWS_TARGET='aws' needs instance_ids: launch the instances from the launch plan "
            "(notebook 00: DLAMI, instance profile with SSM, ECR read and S3 access) first"
        )
    it = catalog.get_instance(instance_type)
    image, _ = images.training_image_for(it.name, session.region, images.EC2_DLC_VERSION)
    bucket = default_bucket(session)
    prefix = f"pt2aws-ec2/{resource_name('pt2aws-ec2')}"
    bundle = stage_bundle(cfg, work_dir)
    bundle_s3 = upload_archive(session, bundle, f"s3://{bucket}/{prefix}/bundle.tar.gz")
    output_s3 = f"s3://{bucket}/{prefix}/output/model.tar.gz"
    where = {"region": session.region, "bundle_s3": bundle_s3, "output_s3": output_s3}
    commands = training_commands(instance_type, cfg, **where)
    sent = session.client("ssm").send_command(
        InstanceIds=instance_ids or [session.emulator.launch_instance(instance_type)],
        DocumentName="AWS-RunShellScript",
        Comment="pt2aws: torchrun -m pt2aws.train in the AWS training DLC",
        Parameters={"commands": commands, "executionTimeout": [str(8 * 3600)]},
        OutputS3BucketName=bucket, OutputS3KeyPrefix=prefix,
    )["Command"]  # fmt: skip
    return where | {
        "target": session.target, "instance_type": instance_type, "image_uri": image,
        "commands": commands, "command_id": sent["CommandId"],
        "instance_ids": sent["InstanceIds"], "status": sent["Status"],
    }  # fmt: skip
