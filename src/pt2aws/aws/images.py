"""Every image pt2aws runs on, chosen offline: SageMaker SDK ``image_uris.retrieve`` first, the
one fallback table ``images.json`` (each fact with its source) where the SDK does not know it. An
image past its end of patch warns once (:class:`ImageSupportWarning`) and names the newer one."""

from __future__ import annotations

import contextlib
import datetime
import json
import re
import warnings
from pathlib import Path

from pt2aws.errors import UserError
from pt2aws.sizing import catalog

#: ``images.json``: registries, tags, support dates and AMI rules, each with its source.
FACTS = json.loads(Path(__file__).with_name("images.json").read_text())
#: ECR account of the AWS Deep Learning Containers per region (source dlc-available-images).
DLC_REGISTRY_ACCOUNTS: dict[str, str] = FACTS["registry_accounts"]["accounts"]
#: SageMaker arm64 PyTorch inference DLCs: version -> ``{"repository", "python", "os"}``.
ARM64_INFERENCE_IMAGES: dict[str, dict] = FACTS["inference"]["arm64"]["versions"]
INFERENCE_TORCH_VERSION: str = FACTS["inference"]["default_torch_version"]
TRAINING_TORCH_VERSION: str = FACTS["training"]["sagemaker_default_torch_version"]
EC2_DLC_VERSION: str = FACTS["training"]["ec2_default_version"]
DLAMI_PYTORCH_VERSION: str = FACTS["dlami"]["default_pytorch_version"]
NEURON_DLAMI_PARAMETER: str = FACTS["dlami"]["neuron_parameter"]
GPU_TRAINING_FAMILIES: tuple[str, ...] = tuple(FACTS["training"]["gpu_families"])
NEURON_TRAINING_FAMILIES: tuple[str, ...] = tuple(FACTS["training"]["neuron_families"])
DEFAULT_INSTANCE_TYPE = "ml.c7g.xlarge"  # Graviton3, 4 vCPUs
DEFAULT_TRAINING_INSTANCE_TYPE = "ml.p4d.24xlarge"  # 8x A100 40 GB, the source blog's
#: A private ECR image URI (ECR user guide, "Creating a private repository": naming rules).
ECR_IMAGE_PATTERN = re.compile(
    r"^(?P<account>\d{12})\.dkr\.ecr\.(?P<region>[a-z]{2}(?:-[a-z]+)+-\d)\.amazonaws\.com(?:\.cn)?"
    r"/(?P<repository>(?:[a-z0-9]+(?:[._-][a-z0-9]+)*/)*[a-z0-9]+(?:[._-][a-z0-9]+)*)"
    r":(?P<tag>[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})$"
)


class ImageSelectionError(UserError, ValueError):
    """No image fits the instance type, PyTorch version and region; the message says what does."""


class TrainingImageError(ImageSelectionError):
    """No PyTorch training image fits the instance type and PyTorch version."""


class ImageSupportWarning(UserWarning):
    """The chosen image or AMI is past its end of patch (no more security fixes)."""


warnings.filterwarnings("once", category=ImageSupportWarning)


def support(line: str, version: str, today: datetime.date | None = None) -> dict:
    """Patch support of image ``line`` (a DLC repository, or ``"DLAMI PyTorch"``) at ``version``:
    ``{"image", "end_of_patch", "past", "verified", "message"}``, the message naming the newest
    line still patched (this one, then its successors); ``KeyError``: no data."""
    today, table = today or datetime.date.today(), FACTS["support"]
    minor = ".".join(version.split(".")[:2])
    eop = datetime.date.fromisoformat(table["lines"][line][minor][1])
    verified = bool(FACTS["sources"][table["line_sources"].get(line, table["source"])]["verified"])
    newer, successor = "no supported successor is known", line
    if line.startswith("pytorch-inference"):
        newer = ("AWS publishes no newer PyTorch CPU inference DLC: deploy your own image "
                 "(image='custom', pt2aws's serving container)")  # fmt: skip
    while successor:
        alive = {v: d[1] for v, d in table["lines"][successor].items() if d[1] >= today.isoformat()}
        if alive:
            newest = max(alive, key=lambda v: tuple(map(int, v.split("."))))
            newer = f"use {successor} {newest} (patched until {alive[newest]})"
            break
        successor = table["successors"].get(successor)
    past, days = today > eop, abs((today - eop).days)
    mark = "" if verified else " (UNVERIFIED date)"
    state = (f"patch support ended {eop}{mark}, {days} days ago: no more security fixes; {newer}"
             if past else f"patched until {eop}{mark} ({days} days left)")  # fmt: skip
    return {"image": f"{line} {minor}", "end_of_patch": eop.isoformat(), "past": past,
            "verified": verified, "message": f"{line} {minor}: {state}"}  # fmt: skip


def _warn_if_past(line: str, version: str) -> None:
    """Warn (:class:`ImageSupportWarning`) when ``line`` at ``version`` is past its end of patch."""
    with contextlib.suppress(KeyError):
        if (found := support(line, version))["past"]:
            warnings.warn(found["message"], ImageSupportWarning, stacklevel=3)


def reported_by_caller():
    """No :class:`ImageSupportWarning` inside: the caller prints each support message itself."""
    return warnings.catch_warnings(action="ignore", category=ImageSupportWarning)


def dlc_registry(region: str) -> str:
    """The AWS DLCs' ``<account>.dkr.ecr.<region>.amazonaws.com[.cn]``; ``ImageSelectionError``."""
    if region not in DLC_REGISTRY_ACCOUNTS:
        raise ImageSelectionError(
            f"no Deep Learning Containers registry known for region {region!r}; "
            f"known: {', '.join(sorted(DLC_REGISTRY_ACCOUNTS))}"
        )
    suffix = ".amazonaws.com.cn" if region.startswith("cn-") else ".amazonaws.com"
    return f"{DLC_REGISTRY_ACCOUNTS[region]}.dkr.ecr.{region}{suffix}"


def check_instance_type(instance_type: str, api: str = "hosting") -> None:
    """``ImageSelectionError`` (``TrainingImageError``) naming the family's sizes unless SageMaker
    ``api`` ("hosting" or "training") offers ``instance_type`` (botocore's enum)."""
    error = ImageSelectionError if api == "hosting" else TrainingImageError
    what = "real-time hosting" if api == "hosting" else "training"
    try:
        family = catalog.instance_family(instance_type)
    except ValueError as err:
        raise error(str(err)) from None
    offered = catalog.botocore_instance_types(api)
    if instance_type not in offered:
        sizes = sorted(t for t in offered if t.startswith(f"ml.{family}."))
        hint = f"sizes of {family}: {', '.join(sizes)}" if sizes else "e.g. ml.c7g.xlarge"
        raise error(
            f"{instance_type} is not a SageMaker {what} instance type (ml.<family>.<size>, "
            f"botocore's list); {hint}"
        )


def _repository(image_uri: str) -> str:
    """``.../pytorch-inference-arm64:2.6.0-...`` -> ``pytorch-inference-arm64``."""
    return image_uri.split("/")[-1].split(":")[0]


def check_image_matches_instance(image_uri: str, instance_type: str) -> None:
    """ImageSelectionError if ``image_uri``'s architecture (in its name) is not the instance's."""
    family, arch = catalog.instance_family(instance_type), catalog.architecture(instance_type)
    repository = _repository(image_uri)
    if arch == "arm64" and "huggingface" in repository:
        raise ImageSelectionError(
            f"{image_uri} is a Hugging Face DLC, which has no arm64 build; {instance_type} "
            f"(family {family}) is arm64 (Graviton). Use the PyTorch arm64 inference image "
            f"with code/inference.py; supported versions: {', '.join(ARM64_INFERENCE_IMAGES)}"
        )
    image_arch = "arm64" if ("arm64" in repository or "graviton" in repository) else "x86_64"
    if image_arch != arch:
        fix = "use inference_image_uri() for a Graviton image" if arch == "arm64" else (
            "pick a Graviton instance (e.g. ml.c7g.xlarge) or an x86 image"
        )  # fmt: skip
        raise ImageSelectionError(
            f"image {image_uri} is {image_arch} but {instance_type} (family {family}) is {arch}: "
            + fix
        )


def inference_image_uri(region: str, torch_version: str = INFERENCE_TORCH_VERSION,
                        instance_type: str = DEFAULT_INSTANCE_TYPE) -> str:  # fmt: skip
    """The SageMaker PyTorch CPU inference DLC for ``instance_type`` (Graviton: the arm64 image,
    where the SDK's list, which stops at c7g, says x86); ``ImageSelectionError``."""
    from sagemaker.core import image_uris

    check_instance_type(instance_type)
    family, arm = catalog.instance_family(instance_type), catalog.is_graviton(instance_type)
    registry = dlc_registry(region)
    sdk = image_uris.config_for_framework("pytorch")["inference"]["versions"]
    known = ARM64_INFERENCE_IMAGES if arm else sdk
    if torch_version not in known:
        raise ImageSelectionError(
            f"no SageMaker {'arm64' if arm else 'x86'} PyTorch inference image for torch "
            f"{torch_version} on {instance_type} (family {family}, "
            f"{'arm64' if arm else 'x86_64'}); supported: {', '.join(known)}"
        )
    image = ARM64_INFERENCE_IMAGES.get(torch_version, {})
    python = image.get("python") or (sdk[torch_version].get("py_versions") or [None])[-1]
    scope = "inference_graviton" if arm else "inference"  # forced: the SDK's list stops at c7g
    try:
        uri = image_uris.retrieve("pytorch", region, version=torch_version, py_version=python,
                                  instance_type=instance_type, image_scope=scope)  # fmt: skip
    except ValueError:  # the SDK does not know this arm64 version: the fallback table does
        if not arm:
            raise
        tag = f"{torch_version}-cpu-{python}-{image['os']}-sagemaker"
        uri = f"{registry}/{image['repository']}:{tag}"
    _warn_if_past(_repository(uri), torch_version)
    return uri


def check_custom_image_uri(image_uri: str, region: str | None = None) -> dict[str, str]:
    """``{"account", "region", "repository", "tag"}`` of your private ECR image; ``ImageSelectionError``."""
    match = ECR_IMAGE_PATTERN.match(image_uri or "")
    if not match:
        raise ImageSelectionError(
            f"{image_uri!r} is not a private ECR image URI "
            "<12-digit account>.dkr.ecr.<region>.amazonaws.com/<repository>:<tag> "
            "(lower-case repository, explicit tag); SageMaker hosting pulls only from private ECR"
        )
    parts = match.groupdict()
    if region and parts["region"] != region:
        raise ImageSelectionError(
            f"{image_uri} is in {parts['region']} but the endpoint is in {region}: push the image "
            f"to an ECR repository in {region} (or replicate it there)"
        )
    return parts


def serving_image(image: str, region: str, instance_type: str, *, image_uri: str = "",
                  torch_version: str = INFERENCE_TORCH_VERSION,
                  network_isolation: bool = False) -> dict:  # fmt: skip
    """Notebook 03's ``IMAGE`` ("dlc", or "custom" with ``image_uri``) checked offline: ``{"image",
    "image_uri", "support": {"message", ...}}`` (not also warned); ``ImageSelectionError``."""
    check_instance_type(instance_type)
    if image not in ("dlc", "custom"):
        raise ImageSelectionError(f"image must be one of dlc, custom, not {image!r}")
    if image == "custom":
        check_custom_image_uri(image_uri, region)
        message = "your own image: rebuild and push it to pick up security fixes"
        return {"image": image, "image_uri": image_uri, "support": {"message": message}}
    if network_isolation:
        raise ImageSelectionError(
            "network isolation needs IMAGE='custom': the AWS PyTorch DLC pip-installs "
            "code/requirements.txt (transformers) when it starts, which fails without "
            "network; the project's own image installs everything at build time"
        )
    with reported_by_caller():
        uri = image_uri or inference_image_uri(region, torch_version, instance_type)
        check_image_matches_instance(uri, instance_type)
    try:
        found = support(_repository(uri), torch_version)
    except KeyError:
        found = {"message": "no support data for this DLC"}
    return {"image": image, "image_uri": uri, "support": found}


def training_image_uri(instance_type: str = DEFAULT_TRAINING_INSTANCE_TYPE,
                       region: str = "us-east-1",
                       pytorch_version: str = TRAINING_TORCH_VERSION) -> str:  # fmt: skip
    """SageMaker PyTorch training DLC for ``instance_type`` (newest Python); TrainingImageError."""
    from sagemaker.core import image_uris

    check_instance_type(instance_type, "training")
    if catalog.instance_family(instance_type) in NEURON_TRAINING_FAMILIES:
        raise TrainingImageError(
            f"{instance_type} is Trainium: it needs the Neuron images and torch-neuronx, which "
            "pt2aws.train does not target; use a GPU type such as ml.p4d.24xlarge or ml.p5.48xlarge"
        )
    table = image_uris.config_for_framework("pytorch")["training"]
    version = table["version_aliases"].get(pytorch_version, pytorch_version)
    if version not in table["versions"]:
        raise TrainingImageError(
            f"no SageMaker PyTorch training image for version {pytorch_version!r}; the installed "
            f"SDK knows {', '.join(table['versions'])} (newer DLCs need a newer sagemaker SDK)"
        )
    python = (table["versions"][version].get("py_versions") or [None])[-1]
    uri = image_uris.retrieve("pytorch", region, version=version, py_version=python,
                              instance_type=instance_type, image_scope="training")  # fmt: skip
    _warn_if_past("pytorch-training", version)
    return uri


def training_image_for(instance_type: str, region: str, dlc_version: str = EC2_DLC_VERSION):
    """``(EC2 training DLC URI, is the GPU image)`` from the fallback table (the SDK lists no EC2
    tags); ``TrainingImageError``, ``ImageSelectionError``."""
    gpu = catalog.instance_family(instance_type) in GPU_TRAINING_FAMILIES
    if not gpu and catalog.architecture(instance_type) == "arm64":
        raise TrainingImageError(
            f"{instance_type} is an arm64 CPU instance: AWS publishes no arm64 CPU training DLC; "
            "pick a GPU (e.g. p4d.24xlarge, g6.xlarge) or x86 instance, or run `torchrun -m "
            "pt2aws.train` in a Python environment there"
        )
    known = FACTS["training"]["ec2"]["versions"]
    if dlc_version not in known:
        raise TrainingImageError(
            f"no EC2 training DLC known for PyTorch {dlc_version}; known: {', '.join(known)}"
        )
    image = known[dlc_version]
    _warn_if_past(image["repository"], dlc_version)
    tag = image["gpu_tag" if gpu else "cpu_tag"]
    return f"{dlc_registry(region)}/{image['repository']}:{tag}", gpu


def dlami_parameter(instance_type: str, pytorch_version: str = DLAMI_PYTORCH_VERSION,
                    os_name: str = FACTS["dlami"]["default_os"]) -> str:  # fmt: skip
    """The public SSM parameter of ``instance_type``'s AMI: the PyTorch DLAMI (GPU), the Neuron
    DLAMI or Amazon Linux 2023 (CPU); ``KeyError``: not in the catalog."""
    it, dlami = catalog.get_instance(instance_type), FACTS["dlami"]
    if it.kind == "gpu":
        _warn_if_past("DLAMI PyTorch", pytorch_version)
        return dlami["gpu_parameter"].format(arch="x86_64", version=pytorch_version, os=os_name)
    if it.kind in ("trainium", "inferentia"):
        return NEURON_DLAMI_PARAMETER
    return dlami["cpu_parameter"].format(arch=catalog.architecture(it.name))
