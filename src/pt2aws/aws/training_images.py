"""Every image training runs on: the SageMaker training DLC, the DLC for EC2, and the AMIs.

Decided offline from ``images.json`` (:func:`pt2aws.aws.image_support.image_facts`) and the
catalog, like :mod:`pt2aws.aws.images` for serving:

* :func:`training_image_uri`: the SageMaker PyTorch training DLC (GPU or CPU) for a training
  job, from the SDK's bundled table;
* :func:`ec2_training_image_uri`: the DLC to run ``torchrun -m pt2aws.train`` in on an EC2
  instance (default: the unified ``pytorch`` DLC on Amazon Linux 2023 with the PyTorch the
  project pins);
* :func:`dlami_parameter`: the public SSM parameter that holds the Deep Learning AMI (GPU), the
  Neuron DLAMI (Trainium / Inferentia) or Amazon Linux 2023 (CPU) to launch an instance with.

Each DLC and DLAMI past its end of patch warns and names the newer one
(:mod:`pt2aws.aws.image_support`).
"""

from __future__ import annotations

import contextlib

from pt2aws.aws.image_support import (
    dlami_support,
    dlc_support,
    image_facts,
    warn_if_past,
)
from pt2aws.aws.images import dlc_registry
from pt2aws.sizing.catalog import (
    architecture,
    botocore_instance_types,
    get_instance,
    instance_family,
)

_FACTS = image_facts()

#: PyTorch version of the SageMaker training image jobs use unless told otherwise.
TRAINING_TORCH_VERSION: str = _FACTS["training"]["sagemaker_default_torch_version"]
#: PyTorch minor version of the DLC an EC2 instance trains in unless told otherwise.
EC2_DLC_VERSION: str = _FACTS["training"]["ec2_default_version"]
#: PyTorch version of the GPU Deep Learning AMI and the OS in its name.
DLAMI_PYTORCH_VERSION: str = _FACTS["dlami"]["default_pytorch_version"]
DLAMI_OS: str = _FACTS["dlami"]["default_os"]
NEURON_DLAMI_PARAMETER: str = _FACTS["dlami"]["neuron_parameter"]
#: 8x A100 40 GB, the source blog's training instance.
DEFAULT_TRAINING_INSTANCE_TYPE = "ml.p4d.24xlarge"
#: Instance families with NVIDIA GPUs that SageMaker training accepts, and the Trainium ones
#: (they need the Neuron images and ``torch-neuronx``, which ``pt2aws.train`` does not target).
GPU_TRAINING_FAMILIES: tuple[str, ...] = tuple(_FACTS["training"]["gpu_families"])
NEURON_TRAINING_FAMILIES: tuple[str, ...] = tuple(_FACTS["training"]["neuron_families"])


class TrainingImageError(ValueError):
    """No PyTorch training image fits the instance type and PyTorch version."""


def training_family(instance_type: str) -> str:
    """``"ml.p4d.24xlarge"`` -> ``"p4d"``; the ``ml.`` prefix is required (a SageMaker type).

    Raises:
        TrainingImageError: not of the form ``ml.<family>.<size>``.
    """
    parts = instance_type.split(".") if isinstance(instance_type, str) else []
    if len(parts) != 3 or parts[0] != "ml" or not all(parts):
        raise TrainingImageError(
            f"instance type {instance_type!r} is not of the form ml.<family>.<size>, "
            "e.g. ml.p4d.24xlarge"
        )
    return parts[1]


def is_gpu_instance(instance_type: str) -> bool:
    """True for instance types with NVIDIA GPUs (``ml.p4d.24xlarge``, ``g5.xlarge`` ...)."""
    return instance_family(instance_type) in GPU_TRAINING_FAMILIES


def training_image_uri(
    instance_type: str = DEFAULT_TRAINING_INSTANCE_TYPE,
    region: str = "us-east-1",
    pytorch_version: str = TRAINING_TORCH_VERSION,
    py_version: str | None = None,
) -> str:
    """URI of the SageMaker PyTorch training DLC for ``instance_type`` and ``pytorch_version``.

    Looks the image up in the SDK's bundled table (offline; ``sagemaker.core.image_uris``, scope
    ``training``) and checks that the processor in the tag (``-gpu-``/``-cpu-``) matches the
    instance.

    Args:
        instance_type: SageMaker training instance, e.g. ``ml.p4d.24xlarge`` (8x A100) or
            ``ml.p5.48xlarge`` (8x H100); CPU types such as ``ml.c5.2xlarge`` get the CPU image.
        region: AWS region of the job (the image lives in that region's ECR).
        pytorch_version: e.g. ``"2.8.0"``; default :data:`TRAINING_TORCH_VERSION`.
        py_version: e.g. ``"py312"``; default the newest AWS publishes for that version.

    Returns:
        e.g. ``763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.10.0-gpu-py313``.

    Raises:
        TrainingImageError: malformed or unknown instance type, a Trainium type, or a PyTorch /
            Python version without a training image; the message lists what exists.
    """
    from sagemaker.core import image_uris

    family = training_family(instance_type)
    if family in NEURON_TRAINING_FAMILIES:
        raise TrainingImageError(
            f"{instance_type} is Trainium: it needs the Neuron images and torch-neuronx, which "
            "pt2aws.train does not target; use a GPU type such as ml.p4d.24xlarge or ml.p5.48xlarge"
        )
    known = botocore_instance_types("training")
    if instance_type not in known:
        examples = sorted(t for t in known if instance_family(t) in ("p4d", "p5", "g5"))
        raise TrainingImageError(
            f"{instance_type!r} is not a SageMaker training instance type; GPU examples: "
            f"{', '.join(examples)}"
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
    with contextlib.suppress(KeyError):  # a version without support data: nothing to say
        warn_if_past(dlc_support("pytorch-training", version))
    return uri


def ec2_training_image_uri(region: str, version: str = EC2_DLC_VERSION, *, gpu: bool = True) -> str:
    """The DLC to train in on an EC2 instance (private ECR of ``region``; ``docker login`` first).

    Args:
        region: the instance's region.
        version: PyTorch minor version, e.g. ``"2.13"`` (the unified ``pytorch`` DLC on Amazon
            Linux 2023) or ``"2.10"`` (the ``pytorch-training`` Ubuntu line).
        gpu: the CUDA image (True) or the CPU image.

    Returns:
        e.g. ``763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch:2.13.0-cu133-amzn2023``.

    Raises:
        TrainingImageError: a version without an EC2 DLC; the message lists the known ones.
        pt2aws.aws.images.ImageSelectionError: a region without a DLC registry.
    """
    known = _FACTS["training"]["ec2"]["versions"]
    if version not in known:
        raise TrainingImageError(
            f"no EC2 training DLC known for PyTorch {version}; known: {', '.join(known)}"
        )
    image = known[version]
    warn_if_past(dlc_support(image["repository"], version))
    tag = image["gpu_tag"] if gpu else image["cpu_tag"]
    return f"{dlc_registry(region)}/{image['repository']}:{tag}"


def training_image_for(
    instance_type: str, region: str, dlc_version: str = EC2_DLC_VERSION
) -> tuple[str, bool]:
    """The EC2 training DLC for ``instance_type`` and whether it is the GPU image.

    Raises:
        TrainingImageError: an arm64 CPU instance (AWS publishes no arm64 CPU training DLC) or an
            unknown DLC version.
    """
    gpu = is_gpu_instance(instance_type)
    if not gpu and architecture(instance_type) == "arm64":
        raise TrainingImageError(
            f"{instance_type} is an arm64 CPU instance: AWS publishes no arm64 CPU training DLC; "
            "pick a GPU (e.g. p4d.24xlarge, g6.xlarge) or x86 instance, or run `torchrun -m "
            "pt2aws.train` in a Python environment there"
        )
    return ec2_training_image_uri(region, dlc_version, gpu=gpu), gpu


# ------------------------------------------------------------------------------ machine images
def dlami_parameter(
    instance_type: str, pytorch_version: str = DLAMI_PYTORCH_VERSION, os_name: str = DLAMI_OS
) -> str:
    """The public SSM parameter holding the AMI ID to launch ``instance_type`` with.

    GPU instances: the PyTorch Deep Learning AMI (NVIDIA driver, CUDA, EFA, Docker with the
    NVIDIA container toolkit); Trainium / Inferentia: the Neuron multi-framework DLAMI; CPU
    instances: Amazon Linux 2023 (arm64 for Graviton).

    Args:
        instance_type: a catalog instance (``"p4d.24xlarge"``; the ``ml.`` prefix is accepted).
        pytorch_version: PyTorch version in the DLAMI's name, e.g. ``"2.13"``.
        os_name: OS in the DLAMI's name, e.g. ``"amazon-linux-2023"`` or ``"ubuntu-24.04"``.

    Returns:
        e.g. ``/aws/service/deeplearning/ami/x86_64/oss-nvidia-driver-gpu-pytorch-2.13-amazon-linux-2023/latest/ami-id``.

    Raises:
        KeyError: the instance type is not in the catalog.

    Warns:
        ImageSupportWarning: the DLAMI's PyTorch version is past its end of patch (UNVERIFIED
            dates, see ``images.json``).
    """
    it = get_instance(instance_type)
    dlami = _FACTS["dlami"]
    if it.kind == "gpu":
        with contextlib.suppress(KeyError):  # a version without support data: nothing to say
            warn_if_past(dlami_support(pytorch_version))
        return dlami["gpu_parameter"].format(arch="x86_64", version=pytorch_version, os=os_name)
    if it.kind in ("trainium", "inferentia"):
        return NEURON_DLAMI_PARAMETER
    return dlami["cpu_parameter"].format(arch=architecture(it.name))
