"""Package a trained model for SageMaker, deploy it to a Graviton endpoint, invoke it, clean up.

Each step fails loudly, before anything is billed, on the mistakes that public issue trackers
show people making (see ``../shared/notes/aws-reference-notes.md`` section 3):

* the artifact: a nested top folder, the handler at the root, a tokenizer left out, symlinks,
  absolute or ``..`` paths (:func:`package` cannot produce them, :func:`validate_archive`
  rejects them and then loads the model and predicts, with no AWS);
* the image: an x86 image for a Graviton instance, a Hugging Face DLC on Graviton, an SDK that
  does not know the newer arm64 images (:func:`inference_image_uri`);
* the bill: endpoints left running after a failure (:func:`deployed_endpoint` deletes what it
  created in ``finally``; ``pt2aws cleanup --prefix`` finds leftovers).

The ``model.tar.gz`` contract of the SageMaker PyTorch inference container (see
aws/sagemaker-pytorch-inference-toolkit): model files at the archive root, the handler in
``code/inference.py`` and its extra packages in ``code/requirements.txt``, which the container
pip-installs at start.
"""

from __future__ import annotations

from pt2aws.sizing.catalog import (
    architecture,
    botocore_instance_types,
    instance_family,
    is_graviton,
)

DEFAULT_INSTANCE_TYPE = "ml.c7g.xlarge"


class ImageSelectionError(ValueError):
    """No inference image matches the requested instance type, PyTorch version and region."""


#: ECR registry account of the AWS Deep Learning Containers per region. Source:
#: aws/deep-learning-containers ``available_images.md`` (region table, stored copy at commit
#: 0081995), completed for newer regions from the SageMaker SDK 3.27.0 ``image_uri_config/
#: pytorch.json`` registries (a unit test checks the two agree where both list a region).
DLC_REGISTRY_ACCOUNTS = {
    "af-south-1": "626614931356",
    "ap-east-1": "871362719292",
    "ap-east-2": "975050140332",
    "ap-northeast-1": "763104351884",
    "ap-northeast-2": "763104351884",
    "ap-northeast-3": "364406365360",
    "ap-south-1": "763104351884",
    "ap-south-2": "772153158452",
    "ap-southeast-1": "763104351884",
    "ap-southeast-2": "763104351884",
    "ap-southeast-3": "907027046896",
    "ap-southeast-4": "457447274322",
    "ap-southeast-5": "550225433462",
    "ap-southeast-7": "590183813437",
    "ca-central-1": "763104351884",
    "ca-west-1": "204538143572",
    "cn-north-1": "727897471807",
    "cn-northwest-1": "727897471807",
    "eu-central-1": "763104351884",
    "eu-central-2": "380420809688",
    "eu-north-1": "763104351884",
    "eu-south-1": "692866216735",
    "eu-south-2": "503227376785",
    "eu-west-1": "763104351884",
    "eu-west-2": "763104351884",
    "eu-west-3": "763104351884",
    "il-central-1": "780543022126",
    "me-central-1": "914824155844",
    "me-south-1": "217643126080",
    "mx-central-1": "637423239942",
    "sa-east-1": "763104351884",
    "us-east-1": "763104351884",
    "us-east-2": "763104351884",
    "us-gov-east-1": "446045086412",
    "us-gov-west-1": "442386744353",
    "us-west-1": "763104351884",
    "us-west-2": "763104351884",
}


#: SageMaker arm64 PyTorch inference DLCs: version -> (repository, python, OS). Source:
#: aws/deep-learning-containers ``available_images.md`` ("SageMaker Framework ARM64/Graviton
#: Containers" tables) and ``docs/src/data/pytorch-inference-arm64/2.6-cpu-sagemaker.yml``.
#: From 2.5 the repository is ``pytorch-inference-arm64`` (was ``-graviton``). Used when the
#: installed SDK's ``image_uris`` does not know the version (SDK 3.27.0 lacks 2.5.1; v2 stops
#: at 2.4.0; aws/sagemaker-python-sdk#5532).
ARM64_INFERENCE_IMAGES = {
    "2.0.1": ("pytorch-inference-graviton", "py310", "ubuntu20.04"),
    "2.1.0": ("pytorch-inference-graviton", "py310", "ubuntu20.04"),
    "2.2.1": ("pytorch-inference-graviton", "py310", "ubuntu20.04"),
    "2.3.0": ("pytorch-inference-graviton", "py311", "ubuntu20.04"),
    "2.4.0": ("pytorch-inference-graviton", "py311", "ubuntu22.04"),
    "2.5.1": ("pytorch-inference-arm64", "py311", "ubuntu22.04"),
    "2.6.0": ("pytorch-inference-arm64", "py312", "ubuntu22.04"),
}


#: Kept for callers of the walking skeleton: version -> Python version of the arm64 image.
GRAVITON_PYTORCH_VERSIONS = {v: py for v, (_, py, _) in ARM64_INFERENCE_IMAGES.items()}


DEFAULT_TORCH_VERSION = "2.6.0"


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


def _sdk_x86_inference_versions() -> dict[str, list[str]]:
    """PyTorch x86 inference versions the installed SDK knows -> their Python versions."""
    from sagemaker.core import image_uris

    config = image_uris.config_for_framework("pytorch")["inference"]["versions"]
    return {v: c.get("py_versions", []) for v, c in config.items()}


def _image_is_arm64(image_uri: str) -> bool:
    repository = image_uri.split("/")[-1].split(":")[0]
    return "arm64" in repository or "graviton" in repository


def check_image_matches_instance(image_uri: str, instance_type: str) -> None:
    """Raise before any AWS call if ``image_uri`` cannot run on ``instance_type``.

    The architecture of a DLC is in its repository name (``-graviton``/``-arm64`` = arm64). Hugging
    Face DLCs have no arm64 build (``image_uris`` raises "Unsupported framework: huggingface" on
    Graviton; aws/sagemaker-python-sdk#3679 shows the x86 one failing after a long wait).

    Raises:
        ImageSelectionError: naming the family, both architectures and what to use instead.
    """
    family, arch = instance_family(instance_type), architecture(instance_type)
    repository = image_uri.split("/")[-1].split(":")[0]
    if arch == "arm64" and "huggingface" in repository:
        raise ImageSelectionError(
            f"{image_uri} is a Hugging Face DLC, which has no arm64 build; {instance_type} "
            f"(family {family}) is arm64 (Graviton). Use the PyTorch arm64 inference image "
            f"(inference_image_uri(region, torch_version, {instance_type!r})) with code/inference.py; "
            f"supported versions: {', '.join(ARM64_INFERENCE_IMAGES)}"
        )
    image_arch = "arm64" if _image_is_arm64(image_uri) else "x86_64"
    if image_arch != arch:
        raise ImageSelectionError(
            f"image {image_uri} is {image_arch} but {instance_type} (family {family}) is {arch}: "
            + (
                "use inference_image_uri() for a Graviton image"
                if arch == "arm64"
                else "pick a Graviton instance (e.g. ml.c7g.xlarge) or an x86 image"
            )
        )


def inference_image_uri(
    region: str,
    torch_version: str = DEFAULT_TORCH_VERSION,
    instance_type: str = DEFAULT_INSTANCE_TYPE,
    *,
    framework: str = "pytorch",
) -> str:
    """ECR URI of the SageMaker PyTorch CPU inference DLC for ``instance_type``; no AWS call.

    Graviton families (:data:`GRAVITON_FAMILIES`) get the arm64 image: from the SDK's
    ``image_uris`` (scope ``inference_graviton``, forced, because the SDK's own family list misses
    c8g/m8g/r8g/r7gd and silently returns x86 for them) when it knows the version, else from
    :data:`ARM64_INFERENCE_IMAGES` and :data:`DLC_REGISTRY_ACCOUNTS`. Other families get the x86
    CPU image from ``image_uris``.

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
    family, arch = instance_family(instance_type), architecture(instance_type)
    if framework != "pytorch":
        raise ImageSelectionError(
            f"framework {framework!r}: "
            + (
                f"Hugging Face DLCs have no arm64 image and {instance_type} (family {family}) is "
                f"arm64 (Graviton); use framework='pytorch' (the PyTorch arm64 DLC runs the model "
                f"through code/inference.py); supported versions: {', '.join(ARM64_INFERENCE_IMAGES)}"
                if arch == "arm64"
                else "pt2aws deploys with the PyTorch DLC and code/inference.py; use framework='pytorch'"
            )
        )
    if region not in DLC_REGISTRY_ACCOUNTS:
        raise ImageSelectionError(
            f"no Deep Learning Containers registry known for region {region!r}; "
            f"known: {', '.join(sorted(DLC_REGISTRY_ACCOUNTS))}"
        )
    from sagemaker.core import image_uris

    if arch == "arm64":
        if torch_version not in ARM64_INFERENCE_IMAGES:
            raise ImageSelectionError(
                f"no SageMaker arm64 PyTorch inference image for torch {torch_version} on "
                f"{instance_type} (family {family}, arm64); supported: "
                f"{', '.join(ARM64_INFERENCE_IMAGES)}"
            )
        repository, py_version, os_version = ARM64_INFERENCE_IMAGES[torch_version]
        try:
            uri = image_uris.retrieve(
                "pytorch",
                region,
                version=torch_version,
                py_version=py_version,
                instance_type=instance_type,
                image_scope="inference_graviton",
            )
        except ValueError:  # the SDK does not know this version: the DLC table does
            suffix = ".amazonaws.com.cn" if region.startswith("cn-") else ".amazonaws.com"
            uri = (
                f"{DLC_REGISTRY_ACCOUNTS[region]}.dkr.ecr.{region}{suffix}/{repository}:"
                f"{torch_version}-cpu-{py_version}-{os_version}-sagemaker"
            )
    else:
        known = _sdk_x86_inference_versions()
        if torch_version not in known:
            raise ImageSelectionError(
                f"no SageMaker x86 PyTorch inference image for torch {torch_version} on "
                f"{instance_type} (family {family}, x86_64); supported: {', '.join(known)}"
            )
        uri = image_uris.retrieve(
            "pytorch",
            region,
            version=torch_version,
            py_version=known[torch_version][-1] if known[torch_version] else None,
            instance_type=instance_type,
            image_scope="inference",
        )
    check_image_matches_instance(uri, instance_type)
    return uri
