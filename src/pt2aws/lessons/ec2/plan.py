"""Launch plan for a chosen instance: the DLAMI ID (public SSM parameter), the EC2 request, the
SageMaker training and endpoint settings.

Nothing here starts an instance. :func:`dry_run` sends the EC2 ``RunInstances`` request with
``DryRun=True``: AWS answers ``DryRunOperation`` when you have the permissions and the request is
well formed (AMI, type), ``UnauthorizedOperation`` or another error otherwise. A dry run does
not reserve capacity or check your vCPU quota (EC2 API reference, ``DryRun``; aws-parallelcluster
PR #1779): check the quota with Service Quotas (:func:`pt2aws.aws.account.check_quota`).
Every call goes where the :class:`pt2aws.aws.session.AwsSession` points: your account, or the
local emulator (:func:`pt2aws.emulator.server.start`), where the same code runs over HTTP
with moto.
Which AMI and which images: :mod:`pt2aws.aws.training_images`, :mod:`pt2aws.aws.images`.
"""

from __future__ import annotations

import logging

from pt2aws.aws import images
from pt2aws.aws import images as image_support  # H3 merged image_support into images
from pt2aws.aws import images as training_images  # H3 merged training_images into images
from pt2aws.aws.deploy import endpoint_environment
from pt2aws.sizing import catalog

logger = logging.getLogger(__name__)


class LaunchPlanError(ValueError):
    """A launch plan cannot be built; the message names the problem and the fix."""


def lookup_ami(session, parameter: str) -> str:
    """Read the AMI ID from the public SSM parameter ``parameter`` in the session's region.

    Raises:
        LaunchPlanError: the parameter does not exist there (wrong version/OS, or region), or
            the caller lacks ``ssm:GetParameter``.
    """
    from botocore.exceptions import ClientError

    region = session.region
    ssm = session.client("ssm")
    try:
        return ssm.get_parameter(Name=parameter)["Parameter"]["Value"]
    except ClientError as exc:
        code = exc.response["Error"]["Code"]
        if code == "ParameterNotFound":
            raise LaunchPlanError(
                f"SSM parameter {parameter} not found in {region}: the DLAMI version or OS in the "
                "name may be retired; list current ones with `aws ssm get-parameters-by-path "
                "--path /aws/service/deeplearning/ami/x86_64 --recursive` or pass another "
                "pytorch_version / os_name"
            ) from None
        raise LaunchPlanError(
            f"reading {parameter} failed ({code}): the caller needs ssm:GetParameter"
        ) from None


def _network_settings(
    bare: str, count: int, name: str, subnet_id, security_group_ids, placement_group
) -> dict:
    """Multi-node EFA: one EFA interface and a cluster placement group; else subnet / groups."""
    efa = bare in {i.name for i in catalog.load_catalog() if i.efa}
    if efa and count > 1:
        if not subnet_id:
            raise LaunchPlanError(
                f"{count} x {bare} with EFA need subnet_id (one subnet, one AZ) and a security "
                "group allowing all traffic to itself"
            )
        interface = {
            "DeviceIndex": 0,
            "InterfaceType": "efa",
            "SubnetId": subnet_id,
            "Groups": list(security_group_ids or []),
            "DeleteOnTermination": True,
        }
        return {
            "NetworkInterfaces": [interface],
            "Placement": {"GroupName": placement_group or f"{name}-cluster"},
        }
    settings = {"SubnetId": subnet_id} if subnet_id else {}
    if security_group_ids:
        settings["SecurityGroupIds"] = list(security_group_ids)
    return settings


def run_instances_request(
    instance_type: str,
    image_id: str,
    count: int = 1,
    *,
    name: str = "pt2aws",
    key_name: str | None = None,
    subnet_id: str | None = None,
    security_group_ids: list[str] | None = None,
    volume_gb: int = 200,
    placement_group: str | None = None,
    instance_profile: str | None = None,
) -> dict:
    """Keyword arguments for ``ec2.run_instances`` (without ``DryRun``).

    Multi-node EFA instances get one EFA network interface (needs ``subnet_id`` and security
    groups that allow all traffic within the group) and a cluster placement group.

    Args:
        instance_type: EC2 name (``ml.`` prefix accepted).
        image_id: the AMI (:func:`lookup_ami`).
        count: instances.
        name: the ``Name`` tag (and the placement group's prefix).
        key_name: an EC2 key pair for SSH; None: reach the instance with SSM only.
        subnet_id, security_group_ids: network placement (required for multi-node EFA).
        volume_gb: root volume size, GB (gp3).
        placement_group: cluster placement group name for EFA; default ``<name>-cluster``.
        instance_profile: IAM instance profile, e.g. one with ``AmazonSSMManagedInstanceCore``
            (SSM Run Command), ECR read and S3 read/write (:mod:`pt2aws.lessons.ec2.run`).

    Raises:
        LaunchPlanError: an instance type EC2 does not know (botocore's enum), count < 1, or a
            multi-node EFA launch without ``subnet_id``.
    """
    bare = instance_type.removeprefix("ml.")
    if not catalog.availability(bare)["ec2"]:
        raise LaunchPlanError(
            f"EC2 has no instance type {bare!r} (botocore's InstanceType list); use the EC2 name, "
            "e.g. p4d.24xlarge (SageMaker adds the ml. prefix)"
        )
    if count < 1:
        raise LaunchPlanError(f"count must be >= 1, got {count}")
    known = {i.name for i in catalog.load_catalog()}
    kind = catalog.get_instance(bare).kind if bare in known else ""
    root_device = "/dev/sda1" if kind in ("trainium", "inferentia") else "/dev/xvda"  # Ubuntu/AL
    request = {
        "ImageId": image_id,
        "InstanceType": bare,
        "MinCount": count,
        "MaxCount": count,
        "BlockDeviceMappings": [
            {
                "DeviceName": root_device,
                "Ebs": {"VolumeSize": volume_gb, "VolumeType": "gp3", "DeleteOnTermination": True},
            }
        ],
        "TagSpecifications": [
            {"ResourceType": "instance", "Tags": [{"Key": "Name", "Value": name}]}
        ],
        "MetadataOptions": {"HttpTokens": "required"},
    }
    if key_name:
        request["KeyName"] = key_name
    if instance_profile:
        request["IamInstanceProfile"] = {"Name": instance_profile}
    request.update(
        _network_settings(bare, count, name, subnet_id, security_group_ids, placement_group)
    )
    return request


def dry_run(session, request: dict) -> dict:
    """Send ``request`` to EC2 with ``DryRun=True``: are the permissions there and is the request
    well formed? (Not: is there quota or capacity.)

    Returns:
        ``{"would_succeed": bool, "code": str, "message": str}``; ``code`` is EC2's error code
        (``DryRunOperation`` means success).
    """
    from botocore.exceptions import ClientError

    ec2 = session.client("ec2")
    try:
        ec2.run_instances(DryRun=True, **request)
    except ClientError as exc:
        err = exc.response["Error"]
        return {
            "would_succeed": err["Code"] == "DryRunOperation",
            "code": err["Code"],
            "message": err.get("Message", ""),
        }
    return {  # a real AWS endpoint never gets here with DryRun=True
        "would_succeed": False,
        "code": "NoDryRunAnswer",
        "message": "the endpoint launched instead of answering DryRunOperation: check and terminate",
    }


def sagemaker_training_settings(
    instance_type: str, nodes: int, region: str, max_runtime_s: int = 24 * 3600
) -> dict:
    """Settings for a SageMaker training job (``sagemaker.train.ModelTrainer``) on ``nodes``.

    Returns:
        ``{"training_image", "instance_type", "instance_count", "distributed", "volume_size_in_gb",
        "max_runtime_in_seconds", "available"}``; ``available`` is False (and the image None)
        where SageMaker training does not offer the type or pt2aws has no image for it.
    """
    it = catalog.get_instance(instance_type)
    try:
        image = training_images.training_image_uri(f"ml.{it.name}", region)
    except training_images.TrainingImageError:  # Trainium (Neuron images) or not a training type
        image = None
    return {
        "training_image": image,
        "instance_type": f"ml.{it.name}",
        "instance_count": nodes,
        "distributed": f"Torchrun(), {it.devices} process(es) per node",
        "volume_size_in_gb": 100,
        "max_runtime_in_seconds": max_runtime_s,
        "available": image is not None,
    }


def sagemaker_endpoint_settings(instance_type: str, region: str) -> dict:
    """Settings for a SageMaker real-time endpoint: image, instance, container environment."""

    it = catalog.get_instance(instance_type)
    hosting = catalog.availability(it.name)["sagemaker_hosting"]
    image = images.inference_image_uri(region, instance_type=f"ml.{it.name}") if hosting else None
    return {
        "image_uri": image,
        "instance_type": f"ml.{it.name}",
        "initial_instance_count": 1,
        "environment": endpoint_environment(f"ml.{it.name}", it.vcpus),
        "available": hosting,
    }


def launch_plan(
    train_instance: str,
    nodes: int = 1,
    serve_instance: str = "c7g.xlarge",
    *,
    session=None,
    region: str = "us-east-1",
    dry_run_ec2: bool = True,
    subnet_id: str | None = None,
) -> dict:
    """Everything needed to start training on ``train_instance`` and serve on ``serve_instance``.

    Args:
        train_instance: EC2 name (``ml.`` prefix accepted) from the catalog.
        nodes: instances for training.
        serve_instance: the endpoint instance (default Graviton ``c7g.xlarge``).
        session: where to look the AMI up and dry-run the request (your account: the DryRun
            starts nothing; needs ``ssm:GetParameter`` and ``ec2:RunInstances``; or the
            emulator); None: no AWS call, the AMI ID is left to resolve.
        region: the region without a session (a session's region wins).
        dry_run_ec2: send the RunInstances request with DryRun=True (with a session).
        subnet_id: for multi-node EFA launches.

    Returns:
        ``{"target" ("aws", "emulator" or "none"), "region", "train_instance", "nodes", "ec2":
        {"ssm_parameter", "ami_id", "request", "dry_run", "dlc_image"}, "sagemaker_training",
        "sagemaker_endpoint", "support" (see :func:`image_support_rows`), "next_steps"}``.
    """
    with image_support.reported_by_caller():  # the plan's "support" rows carry each notice
        return _launch_plan(
            train_instance, nodes, serve_instance, session, region, dry_run_ec2, subnet_id
        )


def _launch_plan(train_instance, nodes, serve_instance, session, region, dry_run_ec2, subnet_id):
    it = catalog.get_instance(train_instance)
    region = session.region if session else region
    parameter = training_images.dlami_parameter(it.name)
    ami = lookup_ami(session, parameter) if session else None
    request = run_instances_request(
        it.name,
        ami or "ami-RESOLVE-FROM-SSM",
        nodes,
        name="pt2aws-train",
        subnet_id=subnet_id or ("subnet-REPLACE" if it.efa and nodes > 1 else None),
    )
    checked = dry_run(session, request) if (dry_run_ec2 and ami) else None
    dlc = _ec2_dlc(it, region)
    gpus = "--gpus all " if it.kind == "gpu" else ""
    steps = [
        f"EC2: launch {nodes} x {it.name} from the AMI in {parameter} with an instance profile "
        "allowing SSM, ECR pulls and S3; then "
        + (
            "pt2aws.lessons.ec2.run.run_on(session, ...) sends, through SSM Run Command, "
            f"`docker run "
            f"{gpus}... {dlc} torchrun --nproc_per_node {it.devices} -m pt2aws.train ...`"
            if dlc
            else "install the project there (`make setup`) and run `python -m pt2aws.train` "
            "(no training DLC exists for this instance's architecture)"
        ),
        (
            f"SageMaker: ModelTrainer(training_image=..., compute=Compute('ml.{it.name}', "
            f"instance_count={nodes}), distributed=Torchrun()) (notebook 01)"
            if catalog.availability(it.name)["sagemaker_training"]
            else f"SageMaker training does not offer ml.{it.name}: train on EC2 as above"
        ),
        f"serve on ml.{serve_instance.removeprefix('ml.')} with notebook 03 (package, validate, deploy)",
    ]
    if it.kind in ("trainium", "inferentia"):
        steps.insert(0, "port training to the AWS Neuron SDK (torch-neuronx) first")
    return {
        "target": session.target if session else "none",
        "region": region,
        "train_instance": it.name,
        "nodes": nodes,
        "ec2": {
            "ssm_parameter": parameter,
            "ami_id": ami,
            "request": request,
            "dry_run": checked,
            "dlc_image": dlc,
        },
        "sagemaker_training": sagemaker_training_settings(it.name, nodes, region),
        "sagemaker_endpoint": sagemaker_endpoint_settings(serve_instance, region),
        "support": image_support_rows(it),
        "next_steps": steps,
    }


def _ec2_dlc(it, region: str) -> str | None:
    """The training DLC for the instance on EC2, or None (Neuron, arm64 CPU)."""
    if it.kind in ("trainium", "inferentia"):
        return None
    try:
        return training_images.training_image_for(it.name, region)[0]
    except training_images.TrainingImageError:
        return None


def image_support_rows(it) -> list[dict]:
    """Patch support of every image the plan names: DLAMI (GPU instances), the EC2 training DLC,
    the SageMaker training DLC and the inference DLC (:meth:`Support.as_dict` each)."""
    facts = image_support.image_facts()
    ec2_line = facts["training"]["ec2"]["versions"][training_images.EC2_DLC_VERSION]
    rows = []
    if it.kind == "gpu":
        rows.append(image_support.dlami_support(training_images.DLAMI_PYTORCH_VERSION))
    rows += [
        image_support.dlc_support(ec2_line["repository"], training_images.EC2_DLC_VERSION),
        image_support.dlc_support("pytorch-training", training_images.TRAINING_TORCH_VERSION),
        image_support.dlc_support(
            images.ARM64_INFERENCE_IMAGES[images.INFERENCE_TORCH_VERSION]["repository"],
            images.INFERENCE_TORCH_VERSION,
        ),
    ]
    return [row.as_dict() for row in rows]


def format_launch_plan(plan: dict) -> str:
    """Human-readable text of :func:`launch_plan`."""
    ec2, tr, ep = plan["ec2"], plan["sagemaker_training"], plan["sagemaker_endpoint"]
    dry = ec2["dry_run"]
    plain = "/ami-amazon-linux-latest/" in ec2["ssm_parameter"]  # CPU: plain Amazon Linux 2023
    lines = [
        f"Launch plan: {plan['nodes']} x {plan['train_instance']} in {plan['region']}",
        f"  {'AMI (a CPU job needs no DLAMI)' if plain else 'DLAMI'}: "
        f"SSM parameter {ec2['ssm_parameter']} -> {ec2['ami_id'] or 'not resolved'}",
        f"  EC2 run_instances: {ec2['request']['MinCount']} x {ec2['request']['InstanceType']}, "
        f"{ec2['request']['BlockDeviceMappings'][0]['Ebs']['VolumeSize']} GB gp3"
        + (
            ", EFA interface + cluster placement group"
            if "NetworkInterfaces" in ec2["request"]
            else ""
        ),
        "  dry run: "
        + (
            "not sent"
            if dry is None
            else f"{'would succeed' if dry['would_succeed'] else 'would FAIL'} ({dry['code']})"
        ),
        (
            f"  SageMaker training: {tr['instance_count']} x {tr['instance_type']}, image "
            f"{tr['training_image']}; {tr['distributed']}"
            if tr["training_image"]
            else f"  SageMaker training: {tr['instance_type']} is not offered (or needs Neuron)"
        ),
        f"  SageMaker endpoint: {ep['instance_type']}, image {ep['image_uri'] or 'n/a'}",
        "  endpoint env: " + ", ".join(f"{k}={v}" for k, v in ep["environment"].items()),
        f"  EC2 training DLC: {ec2.get('dlc_image') or 'none (Neuron / arm64 CPU)'}",
        "patch support:",
        *[f"  {row['message']}" for row in plan.get("support", [])],
        "next steps:",
    ]
    lines += [f"  {i}. {s}" for i, s in enumerate(plan["next_steps"], 1)]
    return "\n".join(lines)
