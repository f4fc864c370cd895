"""Every serving image pt2aws deploys: the AWS inference DLC or the project's own, and why it fits.

Which image fits is decided here, before any AWS call, from the facts in ``images.json`` (each
with its source and date; :func:`pt2aws.aws.image_support.image_facts`) and the instance facts
of :mod:`pt2aws.sizing.catalog`:

* :func:`inference_image_uri`: the SageMaker PyTorch CPU inference DLC for an instance type.
  Graviton gets the arm64 image (``pytorch-inference-arm64`` from 2.5 on, ``-graviton`` before)
  even where the SDK's own family list would hand out an x86 one (it stops at c7g), and a Hugging
  Face DLC on Graviton, an x86 image on arm64 or an unknown version stop with a message naming
  the family, the architecture and the supported versions (aws/sagemaker-python-sdk#5532,
  #3679; ``../shared/notes/aws-reference-notes.md`` section 3). A DLC past its end of patch
  warns (:mod:`pt2aws.aws.image_support`): the last arm64 one, 2.6, ended on 2026-06-30.
* :func:`check_custom_image_uri`: the project's own serving image in the user's ECR
  repository, ``<account>.dkr.ecr.<region>.amazonaws.com/<repository>:<tag>``.

Training images and machine images (SageMaker / EC2 training DLC, Deep Learning AMI) are in
:mod:`pt2aws.aws.training_images`. The registry of the AWS Deep Learning Containers is
``<account>.dkr.ecr.<region>.amazonaws.com`` with one account per region (:func:`dlc_registry`).
"""

from __future__ import annotations

import contextlib
import re
import warnings

from pt2aws.aws.image_support import dlc_support, image_facts, warn_if_past
from pt2aws.sizing.catalog import (
    architecture,
    botocore_instance_types,
    instance_family,
    is_graviton,
)

_FACTS = image_facts()

#: ECR account of the AWS Deep Learning Containers per region (``images.json``, sources
#: dlc-available-images and sagemaker-sdk-3.27.0; a unit test checks they agree).
DLC_REGISTRY_ACCOUNTS: dict[str, str] = _FACTS["registry_accounts"]["accounts"]
#: SageMaker arm64 PyTorch inference DLCs: version -> ``{"repository", "python", "os"}``. Used
#: when the installed SDK's ``image_uris`` does not know the version (3.27.0 lacks 2.5.1).
ARM64_INFERENCE_IMAGES: dict[str, dict] = _FACTS["inference"]["arm64"]["versions"]
#: PyTorch version of the inference image deployments use unless told otherwise.
INFERENCE_TORCH_VERSION: str = _FACTS["inference"]["default_torch_version"]
#: Graviton3, 4 vCPUs: the endpoint instance pt2aws deploys to unless told otherwise.
DEFAULT_INSTANCE_TYPE = "ml.c7g.xlarge"
#: A private ECR image URI: account, region, repository (lower case, ``/``-separated path) and
#: tag (ECR's naming rules, "Creating a private repository", AWS ECR user guide).
ECR_IMAGE_PATTERN = re.compile(
    r"^(?P<account>\d{12})\.dkr\.ecr\.(?P<region>[a-z]{2}(?:-[a-z]+)+-\d)\.amazonaws\.com(?:\.cn)?"
    r"/(?P<repository>(?:[a-z0-9]+(?:[._-][a-z0-9]+)*/)*[a-z0-9]+(?:[._-][a-z0-9]+)*)"
    r":(?P<tag>[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})$"
)


class ImageSelectionError(ValueError):
    """No inference image matches the requested instance type, PyTorch version and region."""


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


def is_aws_dlc(image_uri: str) -> bool:
    """True when ``image_uri`` is in an AWS Deep Learning Containers registry."""
    account = image_uri.split(".", 1)[0]
    return account in set(DLC_REGISTRY_ACCOUNTS.values())


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
    with contextlib.suppress(KeyError):  # a version without support data: nothing to say
        warn_if_past(dlc_support(image_repository(uri), torch_version))
    return uri


def inference_image_support(
    region: str, torch_version: str = INFERENCE_TORCH_VERSION, instance_type=DEFAULT_INSTANCE_TYPE
) -> dict:
    """Patch support of the inference DLC :func:`inference_image_uri` picks (no warning).

    Returns:
        :meth:`pt2aws.aws.image_support.Support.as_dict`: ``{"image", "end_of_patch", "past",
        "message", "verified"}``.

    Raises:
        KeyError: no support data for that image's line and version.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        repository = image_repository(inference_image_uri(region, torch_version, instance_type))
    return dlc_support(repository, torch_version).as_dict()


# ------------------------------------------------------------------------------- custom image
def check_custom_image_uri(image_uri: str, region: str | None = None) -> dict[str, str]:
    """Parse a private ECR image URI; raise before any AWS call if SageMaker cannot pull it.

    The project's own serving image (``container/``), built for linux/arm64 (Graviton) or
    linux/amd64 and pushed to the user's private ECR repository. SageMaker pulls it with the
    endpoint's execution role, which needs ``ecr:GetAuthorizationToken``,
    ``ecr:BatchGetImage`` and ``ecr:GetDownloadUrlForLayer`` on that repository (the managed
    policy ``AmazonSageMakerFullAccess`` grants them).

    Args:
        image_uri: e.g. ``123456789012.dkr.ecr.eu-west-1.amazonaws.com/pt2aws-serve:2026.12``.
        region: the endpoint's region: SageMaker pulls from the ECR of its own region.

    Returns:
        ``{"account", "region", "repository", "tag"}``.

    Raises:
        ImageSelectionError: not a private ECR URI (Docker Hub, ``public.ecr.aws``, no tag,
            upper-case repository ...), or a region other than the endpoint's.
    """
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
