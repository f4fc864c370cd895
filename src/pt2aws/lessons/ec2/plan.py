"""The launch plan for a chosen instance: the AMI (public SSM parameter), the EC2
``RunInstances`` request and its ``DryRun`` (checks permissions and the request, not capacity or
quota), the SageMaker training and endpoint settings. Nothing starts an instance."""

from __future__ import annotations

from pt2aws.aws import images
from pt2aws.aws.deploy import endpoint_environment
from pt2aws.sizing import catalog


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
    ``<name>-cluster``. Raises LaunchPlanError: a type EC2 does not know, or count < 1."""
    bare = instance_type.removeprefix("ml.")
    if not catalog.availability(bare)["ec2"]:
        raise LaunchPlanError(
            f"EC2 has no InstanceType {bare!r}: use the EC2 name, e.g. p4d.24xlarge"
        )
    if count < 1:
        raise LaunchPlanError(f"count must be >= 1, got {count}")
    row = catalog.find(bare)
    neuron = row is not None and row.kind in ("trainium", "inferentia")
    volume = {"VolumeSize": 200, "VolumeType": "gp3", "DeleteOnTermination": True}
    request = {
        "ImageId": image_id,
        "InstanceType": bare,
        "MinCount": count,
        "MaxCount": count,
        "BlockDeviceMappings": [
            {"DeviceName": "/dev/sda1" if neuron else "/dev/xvda", "Ebs": volume}  # Ubuntu / AL
        ],
        "TagSpecifications": [
            {"ResourceType": "instance", "Tags": [{"Key": "Name", "Value": name}]}
        ],
        "MetadataOptions": {"HttpTokens": "required"},
    }
    if row is not None and row.efa and count > 1:
        efa = {"DeviceIndex": 0, "InterfaceType": "efa", "SubnetId": "subnet-REPLACE"}
        request["NetworkInterfaces"] = [efa | {"Groups": [], "DeleteOnTermination": True}]
        request["Placement"] = {"GroupName": f"{name}-cluster"}
    return request


def dry_run(session, request: dict) -> dict:
    """``{"would_succeed", "code", "message"}`` of ``request`` sent with ``DryRun=True``."""
    from botocore.exceptions import ClientError

    try:
        session.client("ec2").run_instances(DryRun=True, **request)
    except ClientError as exc:
        err = exc.response["Error"]
        ok = err["Code"] == "DryRunOperation"
        return {"would_succeed": ok, "code": err["Code"], "message": err.get("Message", "")}
    message = "the endpoint launched instead of answering DryRunOperation: check and terminate"
    return {"would_succeed": False, "code": "NoDryRunAnswer", "message": message}


def _or_none(choose) -> str | None:
    """``choose()``, or None where no such image exists (TrainingImageError)."""
    try:
        return choose()
    except images.TrainingImageError:
        return None


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
        dlc = _or_none(lambda: None if neuron else images.training_image_for(it.name, region)[0])
        training_image = _or_none(lambda: images.training_image_uri(trainer, region))
        hosting = catalog.availability(serve)["sagemaker_hosting"]
        serving_image = images.inference_image_uri(region, instance_type=serve) if hosting else None
        support = _support(it)
    return {
        "target": session.target if session else "none",
        "region": region,
        "train_instance": it.name,
        "nodes": nodes,
        "ec2": {
            "ssm_parameter": parameter,
            "ami_id": ami,
            "request": request,
            "dry_run": dry_run(session, request) if ami else None,
            "dlc_image": dlc,
        },
        "sagemaker_training": {  # no image: not a SageMaker training type, or Neuron
            "training_image": training_image,
            "instance_type": trainer,
            "instance_count": nodes,
            "distributed": f"Torchrun(), {it.devices} process(es) per node",
        },
        "sagemaker_endpoint": {
            "image_uri": serving_image,
            "instance_type": serve,
            "environment": endpoint_environment(serve),
        },
        "support": support,
        "next_steps": _next_steps(it, nodes, parameter, dlc, serve),
    }


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


def _next_steps(it, nodes: int, parameter: str, dlc: str | None, serve_instance: str) -> list[str]:
    gpus = "--gpus all " if it.kind == "gpu" else ""
    run = (
        f"pt2aws.lessons.ec2.run.run_on(session, ...) sends, through SSM Run Command, `docker run "
        f"{gpus}... {dlc} torchrun --nproc_per_node {it.devices} -m pt2aws.train ...`"
        if dlc
        else "install the project there (`make setup`) and run `python -m pt2aws.train` (no "
        "training DLC for this instance)"
    )
    steps = [
        f"EC2: launch {nodes} x {it.name} from the AMI in {parameter} with an instance profile "
        f"allowing SSM, ECR pulls and S3; then {run}",
        f"SageMaker: ModelTrainer(training_image=..., compute=Compute('ml.{it.name}', "
        f"instance_count={nodes}), distributed=Torchrun()) (notebook 01)"
        if catalog.availability(it.name)["sagemaker_training"]
        else f"SageMaker training does not offer ml.{it.name}: train on EC2 as above",
        f"serve on {serve_instance} with notebook 03",
    ]
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
