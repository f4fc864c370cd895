"""Every image pt2aws runs on: the inference and training containers, and the machine images.

Which image fits is decided here, before any AWS call, from the facts in ``images.json`` beside
this file (each with its source and date) and the instance facts of
:mod:`pt2aws.sizing.catalog`:

* :func:`inference_image_uri`: the SageMaker PyTorch CPU inference DLC for an instance type.
  Graviton gets the arm64 image (``pytorch-inference-arm64`` from 2.5 on, ``-graviton`` before)
  even where the SDK's own family list would hand out an x86 one (it stops at c7g), and a Hugging
  Face DLC on Graviton, an x86 image on arm64 or an unknown version stop with a message naming
  the family, the architecture and the supported versions (aws/sagemaker-python-sdk#5532,
  #3679; ``../shared/notes/aws-reference-notes.md`` section 3).
* :func:`training_image_uri`: the SageMaker PyTorch training DLC (GPU or CPU) for a training job.
* :func:`dlami_parameter`: the public SSM parameter that holds the Deep Learning AMI (GPU), the
  Neuron DLAMI (Trainium / Inferentia) or Amazon Linux 2023 (CPU) to launch an EC2 instance with.

The registry of the AWS Deep Learning Containers is ``<account>.dkr.ecr.<region>.amazonaws.com``
with one account per region (:func:`dlc_registry`).
"""

from __future__ import annotations

import json
from pathlib import Path

from pt2aws.sizing.catalog import (
    architecture,
    botocore_instance_types,
    get_instance,
    instance_family,
    is_graviton,
)

IMAGES_PATH = Path(__file__).with_name("images.json")
_FACTS = json.loads(IMAGES_PATH.read_text())

#: ECR account of the AWS Deep Learning Containers per region (``images.json``, sources
#: dlc-available-images and sagemaker-sdk-3.27.0; a unit test checks they agree).
DLC_REGISTRY_ACCOUNTS: dict[str, str] = _FACTS["registry_accounts"]["accounts"]
#: SageMaker arm64 PyTorch inference DLCs: version -> ``{"repository", "python", "os"}``. Used
#: when the installed SDK's ``image_uris`` does not know the version (3.27.0 lacks 2.5.1).
ARM64_INFERENCE_IMAGES: dict[str, dict] = _FACTS["inference"]["arm64"]["versions"]
#: PyTorch version of the inference image deployments use unless told otherwise.
INFERENCE_TORCH_VERSION: str = _FACTS["inference"]["default_torch_version"]
#: PyTorch version of the SageMaker training image jobs use unless told otherwise.
TRAINING_TORCH_VERSION: str = _FACTS["training"]["sagemaker_default_torch_version"]
#: PyTorch version of the GPU Deep Learning AMI and the OS in its name.
DLAMI_PYTORCH_VERSION: str = _FACTS["dlami"]["default_pytorch_version"]
DLAMI_OS: str = _FACTS["dlami"]["default_os"]
NEURON_DLAMI_PARAMETER: str = _FACTS["dlami"]["neuron_parameter"]

#: Graviton3, 4 vCPUs: the endpoint instance pt2aws deploys to unless told otherwise.
DEFAULT_INSTANCE_TYPE = "ml.c7g.xlarge"
#: 8x A100 40 GB, the source blog's training instance.
DEFAULT_TRAINING_INSTANCE_TYPE = "ml.p4d.24xlarge"
#: Instance families with NVIDIA GPUs that SageMaker training accepts, and the Trainium ones
#: (they need the Neuron images and ``torch-neuronx``, which ``pt2aws.train`` does not target).
GPU_TRAINING_FAMILIES: tuple[str, ...] = tuple(_FACTS["training"]["gpu_families"])
NEURON_TRAINING_FAMILIES: tuple[str, ...] = tuple(_FACTS["training"]["neuron_families"])


class ImageSelectionError(ValueError):
    """No inference image matches the requested instance type, PyTorch version and region."""


class TrainingImageError(ValueError):
    """No SageMaker PyTorch training image fits the instance type and PyTorch version."""


def dlc_registry(region: str) -> str:
    """``<account>.dkr.ecr.<region>.amazonaws.com`` (``.com.cn`` in China) of the AWS DLCs.

    Raises:
        ImageSelectionError: a region without a known registry; the message lists the known ones.
    """
    if region not in DLC_REGISTRY_ACCOUNTS:
        raise ImageSelectionError(
            f"no Deep Learning Containers registry known for region {region!r}; "
            f"known: {', '.join(sorted(DLC_REGISTRY_ACCOUNTS))}"
        )
    suffix = ".amazonaws.com.cn" if region.startswith("cn-") else ".amazonaws.com"
    return f"{DLC_REGISTRY_ACCOUNTS[region]}.dkr.ecr.{region}{suffix}"


# ------------------------------------------------------------------------------------ inference
def hosting_graviton_families() -> tuple[str, ...]:
    """Graviton families SageMaker real-time hosting accepts (botocore enum x catalog processor)."""
    families = {instance_family(t) for t in botocore_instance_types("hosting")}
    return tuple(sorted(f for f in families if is_graviton(f"ml.{f}.xlarge")))


def check_instance_type(instance_type: str) -> None:
    """Raise before any AWS call if SageMaker hosting does not offer ``instance_type``.

    Raises:
        ImageSelectionError: malformed or unknown type; the message lists the family's sizes, or
            the Graviton families.
    """
    try:
        family = instance_family(instance_type)
    except ValueError as err:
        raise ImageSelectionError(str(err)) from None
    hosting = botocore_instance_types("hosting")
    if not instance_type.startswith("ml.") or instance_type not in hosting:
        sizes = sorted(t for t in hosting if t.startswith(f"ml.{family}."))
        hint = (
            f"sizes of {family}: {', '.join(sizes)}"
            if sizes
            else f"Graviton families: {', '.join(hosting_graviton_families())}"
        )
        raise ImageSelectionError(
            f"{instance_type} is not a SageMaker real-time hosting instance type "
            f"(botocore ProductionVariantInstanceType); {hint}"
        )


def image_repository(image_uri: str) -> str:
    """The repository part of an image URI: ``.../pytorch-inference-arm64:2.6.0-...`` -> name."""
    return image_uri.split("/")[-1].split(":")[0]


def check_image_matches_instance(image_uri: str, instance_type: str) -> None:
    """Raise before any AWS call if the AWS DLC ``image_uri`` cannot run on ``instance_type``.

    The architecture of a DLC is in its repository name (``-graviton``/``-arm64`` = arm64). Hugging
    Face DLCs have no arm64 build (``image_uris`` raises "Unsupported framework: huggingface" on
    Graviton; aws/sagemaker-python-sdk#3679 shows the x86 one failing after a long wait).

    Raises:
        ImageSelectionError: naming the family, both architectures and what to use instead.
    """
    family, arch = instance_family(instance_type), architecture(instance_type)
    repository = image_repository(image_uri)
    if arch == "arm64" and "huggingface" in repository:
        raise ImageSelectionError(
            f"{image_uri} is a Hugging Face DLC, which has no arm64 build; {instance_type} "
            f"(family {family}) is arm64 (Graviton). Use the PyTorch arm64 inference image "
            f"(inference_image_uri(region, torch_version, {instance_type!r})) with "
            f"code/inference.py; supported versions: {', '.join(ARM64_INFERENCE_IMAGES)}"
        )
    image_arch = "arm64" if ("arm64" in repository or "graviton" in repository) else "x86_64"
    if image_arch != arch:
        raise ImageSelectionError(
            f"image {image_uri} is {image_arch} but {instance_type} (family {family}) is {arch}: "
            + (
                "use inference_image_uri() for a Graviton image"
                if arch == "arm64"
                else "pick a Graviton instance (e.g. ml.c7g.xlarge) or an x86 image"
            )
        )


def _framework_error(framework: str, instance_type: str) -> ImageSelectionError:
    family = instance_family(instance_type)
    if architecture(instance_type) == "arm64":
        return ImageSelectionError(
            f"framework {framework!r}: Hugging Face DLCs have no arm64 image and {instance_type} "
            f"(family {family}) is arm64 (Graviton); use framework='pytorch' (the PyTorch arm64 "
            f"DLC runs the model through code/inference.py); supported versions: "
            f"{', '.join(ARM64_INFERENCE_IMAGES)}"
        )
    return ImageSelectionError(
        f"framework {framework!r}: pt2aws deploys with the PyTorch DLC and code/inference.py; "
        "use framework='pytorch'"
    )


def _arm64_inference_uri(region: str, torch_version: str, instance_type: str) -> str:
    """The SDK's ``inference_graviton`` image when it knows the version, else the DLC table's."""
    from sagemaker.core import image_uris

    if torch_version not in ARM64_INFERENCE_IMAGES:
        raise ImageSelectionError(
            f"no SageMaker arm64 PyTorch inference image for torch {torch_version} on "
            f"{instance_type} (family {instance_family(instance_type)}, arm64); supported: "
            f"{', '.join(ARM64_INFERENCE_IMAGES)}"
        )
    image = ARM64_INFERENCE_IMAGES[torch_version]
    try:  # scope forced: the SDK's own family list misses c8g/m8g/r8g/r7gd (returns x86)
        return image_uris.retrieve(
            "pytorch",
            region,
            version=torch_version,
            py_version=image["python"],
            instance_type=instance_type,
            image_scope="inference_graviton",
        )
    except ValueError:  # the SDK does not know this version: the DLC table does
        return (
            f"{dlc_registry(region)}/{image['repository']}:"
            f"{torch_version}-cpu-{image['python']}-{image['os']}-sagemaker"
        )


def _x86_inference_uri(region: str, torch_version: str, instance_type: str) -> str:
    """The SDK's x86 CPU inference image for ``torch_version`` (its newest Python)."""
    from sagemaker.core import image_uris

    config = image_uris.config_for_framework("pytorch")["inference"]["versions"]
    known = {v: c.get("py_versions", []) for v, c in config.items()}
    if torch_version not in known:
        raise ImageSelectionError(
            f"no SageMaker x86 PyTorch inference image for torch {torch_version} on "
            f"{instance_type} (family {instance_family(instance_type)}, x86_64); supported: "
            f"{', '.join(known)}"
        )
    return image_uris.retrieve(
        "pytorch",
        region,
        version=torch_version,
        py_version=known[torch_version][-1] if known[torch_version] else None,
        instance_type=instance_type,
        image_scope="inference",
    )


def inference_image_uri(
    region: str,
    torch_version: str = INFERENCE_TORCH_VERSION,
    instance_type: str = DEFAULT_INSTANCE_TYPE,
    *,
    framework: str = "pytorch",
) -> str:
    """ECR URI of the SageMaker PyTorch CPU inference DLC for ``instance_type``; no AWS call.

    Graviton families get the arm64 image: from the SDK's ``image_uris`` (scope
    ``inference_graviton``, forced) when it knows the version, else from
    :data:`ARM64_INFERENCE_IMAGES` and :func:`dlc_registry`. Other families get the x86 CPU image
    from ``image_uris``.

    Args:
        region: AWS region, e.g. ``"eu-west-1"``.
        torch_version: PyTorch version of the image, e.g. ``"2.6.0"``.
        instance_type: SageMaker hosting type, e.g. ``"ml.c7g.xlarge"``.
        framework: ``"pytorch"``; ``"huggingface"`` exists only to fail clearly on Graviton.

    Returns:
        e.g. ``763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-inference-arm64:2.6.0-cpu-py312-ubuntu22.04-sagemaker``.

    Raises:
        ImageSelectionError: unknown instance type, region or version; a Hugging Face DLC on
            Graviton; an image whose architecture does not match the instance. The message names
            the family, the architecture and the supported versions.
    """
    if isinstance(torch_version, str) and torch_version.startswith("ml."):
        raise ImageSelectionError(
            f"torch_version={torch_version!r} looks like an instance type: the arguments are "
            "(region, torch_version, instance_type)"
        )
    check_instance_type(instance_type)
    if framework != "pytorch":
        raise _framework_error(framework, instance_type)
    dlc_registry(region)  # an unknown region fails here, before the SDK is imported
    if architecture(instance_type) == "arm64":
        uri = _arm64_inference_uri(region, torch_version, instance_type)
    else:
        uri = _x86_inference_uri(region, torch_version, instance_type)
    check_image_matches_instance(uri, instance_type)
    return uri


# ------------------------------------------------------------------------------------- training
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
    return uri


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
    """
    it = get_instance(instance_type)
    dlami = _FACTS["dlami"]
    if it.kind == "gpu":
        return dlami["gpu_parameter"].format(arch="x86_64", version=pytorch_version, os=os_name)
    if it.kind in ("trainium", "inferentia"):
        return NEURON_DLAMI_PARAMETER
    return dlami["cpu_parameter"].format(arch=architecture(it.name))
