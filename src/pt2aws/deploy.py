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

import contextlib
import functools
import gzip
import io
import json
import logging
import re
import tarfile
import tempfile
import time
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

from pt2aws.serving import HANDLER_PATH

logger = logging.getLogger(__name__)

# --------------------------------------------------------------------------------------------
# Instances
# --------------------------------------------------------------------------------------------

#: Graviton (arm64) instance families that SageMaker real-time hosting accepts (botocore
#: ``ProductionVariantInstanceType`` enum, botocore 1.44.8), with their Graviton generation
#: (AWS Graviton Technical Guide; c7g/r7gd = Graviton3, the 8-series = Graviton4).
GRAVITON_GENERATIONS = {
    "c6g": 2,
    "c6gd": 2,
    "c6gn": 2,
    "c7g": 3,
    "c8g": 4,
    "m6g": 2,
    "m6gd": 2,
    "m8g": 4,
    "r6g": 2,
    "r6gd": 2,
    "r7gd": 3,
    "r8g": 4,
}
GRAVITON_FAMILIES = tuple(GRAVITON_GENERATIONS)
#: vCPUs per instance size (Amazon EC2 instance type pages: a ``large`` has 2 vCPUs and each
#: size step doubles; a Graviton ``medium`` has 1, an x86 burstable ``t*.medium`` 2). On Graviton
#: one vCPU is one physical core; on x86 one vCPU is one hyper-thread (2 per core).
SIZE_VCPUS = {
    "large": 2,
    "xlarge": 4,
    "2xlarge": 8,
    "4xlarge": 16,
    "8xlarge": 32,
    "9xlarge": 36,
    "12xlarge": 48,
    "16xlarge": 64,
    "18xlarge": 72,
    "24xlarge": 96,
    "48xlarge": 192,
}
DEFAULT_INSTANCE_TYPE = "ml.c7g.xlarge"


class ImageSelectionError(ValueError):
    """No inference image matches the requested instance type, PyTorch version and region."""


class ArchiveError(ValueError):
    """``model.tar.gz`` breaks the SageMaker layout; the message names the member and the fix."""


class DeploymentError(RuntimeError):
    """The endpoint reached ``Failed`` (the message carries SageMaker's ``FailureReason``)."""


def instance_family(instance_type: str) -> str:
    """``"ml.c7g.xlarge"`` -> ``"c7g"``.

    Raises:
        ValueError: not of the form ``ml.<family>.<size>``.
    """
    parts = instance_type.split(".") if isinstance(instance_type, str) else []
    if len(parts) != 3 or parts[0] != "ml":
        raise ValueError(
            f"instance type {instance_type!r} is not of the form ml.<family>.<size>, e.g. ml.c7g.xlarge"
        )
    return parts[1]


def is_graviton(instance_type: str) -> bool:
    """True for Graviton (arm64) SageMaker instance types."""
    return instance_family(instance_type) in GRAVITON_FAMILIES


def architecture(instance_type: str) -> str:
    """``"arm64"`` for Graviton families, else ``"x86_64"``."""
    return "arm64" if is_graviton(instance_type) else "x86_64"


@functools.lru_cache(maxsize=1)
def hosting_instance_types() -> frozenset[str]:
    """Instance types SageMaker real-time hosting accepts (botocore's bundled API model, offline)."""
    import botocore.session

    shape = (
        botocore.session.get_session()
        .get_service_model("sagemaker")
        .shape_for("ProductionVariantInstanceType")
    )
    return frozenset(shape.enum)


def check_instance_type(instance_type: str) -> None:
    """Raise before any AWS call if SageMaker hosting does not offer ``instance_type``.

    Raises:
        ImageSelectionError: unknown type; the message lists the Graviton families.
    """
    family = instance_family(instance_type)
    if instance_type not in hosting_instance_types():
        sizes = sorted(t for t in hosting_instance_types() if t.startswith(f"ml.{family}."))
        hint = (
            f"sizes of {family}: {', '.join(sizes)}"
            if sizes
            else f"Graviton families: {', '.join(GRAVITON_FAMILIES)}"
        )
        raise ImageSelectionError(
            f"{instance_type} is not a SageMaker real-time hosting instance type "
            f"(botocore ProductionVariantInstanceType); {hint}"
        )


def instance_vcpus(instance_type: str) -> int:
    """vCPUs of a SageMaker instance type (see :data:`SIZE_VCPUS`).

    Raises:
        ValueError: a size not in the table (pass ``vcpus=`` explicitly then).
    """
    family, size = instance_family(instance_type), instance_type.split(".")[2]
    if size == "medium":
        return 1 if family in GRAVITON_FAMILIES else 2
    if size not in SIZE_VCPUS:
        raise ValueError(
            f"unknown size {size!r} in {instance_type}: pass vcpus= explicitly "
            f"(known sizes: medium, {', '.join(SIZE_VCPUS)})"
        )
    return SIZE_VCPUS[size]


# --------------------------------------------------------------------------------------------
# Images
# --------------------------------------------------------------------------------------------

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


# --------------------------------------------------------------------------------------------
# Artifact
# --------------------------------------------------------------------------------------------

TOKENIZER_FILES = (
    "tokenizer.json",
    "vocab.json",
    "vocab.txt",
    "spiece.model",
    "sentencepiece.bpe.model",
)
WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin", "model.safetensors.index.json")
#: Packages pinned in ``code/requirements.txt`` besides transformers when this environment saved
#: the model. torch is not listed: the DLC brings its own (arm64-optimised) build, and a pip
#: install of torch at container start would replace it.
COMPANION_PACKAGES = ("tokenizers", "safetensors")


def requirements_for(model_dir: str | Path) -> str:
    """``code/requirements.txt`` pinned to the versions that saved ``model_dir``.

    ``transformers`` comes from ``config.json`` key ``transformers_version`` (written by
    ``save_pretrained``); tokenizers and safetensors are pinned to the installed versions when
    the installed transformers is that same version (else pip picks compatible ones).
    """
    config = json.loads((Path(model_dir) / "config.json").read_text())
    saved = config.get("transformers_version")
    try:
        installed = metadata.version("transformers")
    except metadata.PackageNotFoundError:
        installed = None
    if not saved:
        logger.warning("config.json has no transformers_version; pinning the installed one")
        saved = installed
    lines = [f"transformers=={saved}"]
    if saved == installed:
        for package_name in COMPANION_PACKAGES:
            with contextlib.suppress(metadata.PackageNotFoundError):
                lines.append(f"{package_name}=={metadata.version(package_name)}")
    return "\n".join(lines) + "\n"


def _model_files(model_dir: Path) -> list[tuple[str, Path]]:
    files = []
    for path in sorted(model_dir.rglob("*")):
        rel = path.relative_to(model_dir)
        if rel.parts[0] == "code" or any(part.startswith(".") for part in rel.parts):
            continue  # our handler replaces code/; skip .ipynb_checkpoints and the like
        if path.is_symlink() and not path.exists():
            raise ArchiveError(f"{rel}: broken symlink to {path.readlink()}; fix or remove it")
        if path.is_symlink() and path.is_dir():
            raise ArchiveError(
                f"{rel}: symlinked folder; copy it in (save_pretrained writes real files)"
            )
        if path.is_file():
            files.append((rel.as_posix(), path))
    return files


def _check_no_compiled_prefix(weights: Path) -> None:
    if weights.name != "model.safetensors":
        return
    from safetensors import safe_open

    with safe_open(str(weights), framework="pt") as f:
        bad = [k for k in f.keys() if k.startswith("_orig_mod.")]
    if bad:
        raise ArchiveError(
            f"{weights.name}: {len(bad)} keys start with '_orig_mod.' (weights saved from a "
            "torch.compile wrapper); save the unwrapped model (model._orig_mod.save_pretrained)"
        )


def package(
    model_dir: str | Path, output_path: str | Path, *, handler: str | Path = HANDLER_PATH
) -> Path:
    """Write ``model.tar.gz``: the files of ``model_dir`` at the root plus ``code/``.

    ``code/inference.py`` is ``handler``; ``code/requirements.txt`` comes from
    :func:`requirements_for`. Symlinks to files are dereferenced (the HF cache uses them; a tar
    with links fails to extract on SageMaker); broken or folder links are refused. Members are
    sorted, time-stamped 0 and owned by uid 0, so the same inputs give the same bytes. The size
    is logged (INFO) and is ``output_path.stat().st_size``.

    Returns:
        The archive's path.

    Raises:
        FileNotFoundError: ``model_dir`` has no ``config.json``.
        ArchiveError: no weights or no tokenizer files, a broken or folder symlink, or weights
            saved from a compiled module.
    """
    model_dir, output_path = Path(model_dir), Path(output_path)
    if not (model_dir / "config.json").is_file():
        raise FileNotFoundError(
            f"{model_dir} has no config.json: pass the folder written by save_pretrained"
        )
    files = _model_files(model_dir)
    names = {name for name, _ in files}
    if not names & set(WEIGHT_FILES):
        raise ArchiveError(f"{model_dir}: no weights (expected one of {WEIGHT_FILES})")
    if not names & set(TOKENIZER_FILES):
        raise ArchiveError(
            f"{model_dir}: no tokenizer (expected one of {TOKENIZER_FILES}); "
            "call tokenizer.save_pretrained(model_dir) too"
        )
    if "model.safetensors" in names:
        _check_no_compiled_prefix(model_dir / "model.safetensors")
    members: list[tuple[str, bytes]] = [(name, path.read_bytes()) for name, path in files]
    members += [
        ("code/inference.py", Path(handler).read_bytes()),
        ("code/requirements.txt", requirements_for(model_dir).encode()),
    ]
    output_path.parent.mkdir(parents=True, exist_ok=True)
    with (
        open(output_path, "wb") as raw,
        gzip.GzipFile(filename="", fileobj=raw, mode="wb", mtime=0) as gz,
        tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar,
    ):
        for name, data in sorted(members):
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.mode, info.uid, info.gid = len(data), 0, 0o644, 0, 0
            tar.addfile(info, io.BytesIO(data))
    size = output_path.stat().st_size
    logger.info(
        "wrote %s: %d members, %d bytes (%.1f MB)", output_path, len(members), size, size / 1e6
    )
    return output_path


def _check_member(info: tarfile.TarInfo) -> None:
    name = info.name
    if info.issym() or info.islnk():
        raise ArchiveError(
            f"{name}: {'symlink' if info.issym() else 'hard link'} to {info.linkname!r}; links "
            "are not allowed (SageMaker fails to extract them); rebuild with "
            "pt2aws.deploy.package, which dereferences them"
        )
    if name.startswith("/") or re.match(r"^[A-Za-z]:[\\/]", name):
        raise ArchiveError(
            f"{name}: absolute path; members must be relative to the archive root "
            "(tar -C model_dir -czf model.tar.gz .)"
        )
    if ".." in Path(name).parts:
        raise ArchiveError(
            f"{name}: '..' path escapes the archive root; rebuild with pt2aws.deploy.package"
        )
    if not (info.isfile() or info.isdir()):
        raise ArchiveError(f"{name}: not a regular file (device or fifo); remove it")


def validate_archive(path: str | Path, *, smoke_test: bool = True) -> dict:
    """Check ``model.tar.gz`` against the SageMaker layout, then (optionally) load and predict.

    Returns:
        ``{"members": [sorted names], "member_count": int, "bytes": int (archive size),
        "requirements": str, "prediction": [{"label", "score"}, ...] | None}``.

    Raises:
        ArchiveError: a nested top folder, the handler at the root instead of ``code/``, missing
            config, weights, tokenizer or ``code/requirements.txt``, symlinks or hard links,
            absolute or ``..`` paths, special files; each names the member and the fix.
    """
    path = Path(path)
    try:
        with tarfile.open(path, "r:gz") as tar:
            infos = tar.getmembers()
            names = [i.name.removeprefix("./") for i in infos if not i.isdir()]
            for info in infos:
                _check_member(info)
            requirements = (
                tar.extractfile(
                    next(i for i in infos if i.name.removeprefix("./") == "code/requirements.txt")
                )
                .read()
                .decode()
                if "code/requirements.txt" in names
                else ""
            )
    except (tarfile.TarError, OSError, EOFError) as err:
        raise ArchiveError(f"{path}: not a readable .tar.gz ({err}); rebuild it") from None
    tops = {n.split("/")[0] for n in names}
    if "config.json" not in names:
        nested = sorted(
            t for t in tops if t != "code" and any(n.startswith(f"{t}/") for n in names)
        )
        hint = (
            f": found {nested[0]}/config.json, the files are nested in a top folder; "
            f"tar from inside it (tar -C {nested[0]} -czf model.tar.gz .)"
            if nested and f"{nested[0]}/config.json" in names
            else "; save the model with save_pretrained and rebuild with pt2aws.deploy.package"
        )
        raise ArchiveError(f"config.json missing at the archive root{hint}")
    if "inference.py" in names:
        raise ArchiveError(
            "inference.py at the root: the toolkit loads code/inference.py; move it to code/"
        )
    if "code/inference.py" not in names:
        raise ArchiveError(
            "code/inference.py missing: add the handler (pt2aws.serving.HANDLER_PATH)"
        )
    if "code/requirements.txt" not in names:
        raise ArchiveError(
            "code/requirements.txt missing: the PyTorch DLC has no transformers; add "
            "code/requirements.txt with transformers==<the version that saved the model>"
        )
    if not any(n in names for n in WEIGHT_FILES):
        raise ArchiveError(f"no weights at the root: expected one of {WEIGHT_FILES}")
    if not any(n in names for n in TOKENIZER_FILES):
        raise ArchiveError(
            f"no tokenizer at the root: expected one of {TOKENIZER_FILES}; "
            "save the tokenizer with the model (tokenizer.save_pretrained(model_dir))"
        )
    result = {
        "members": sorted(names),
        "member_count": len(names),
        "bytes": path.stat().st_size,
        "requirements": requirements,
        "prediction": None,
    }
    if smoke_test:
        result["prediction"] = smoke_test_archive(path)
    return result


def _load_handler(code_dir: Path):
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "pt2aws_archive_handler", code_dir / "inference.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def smoke_test_archive(path: str | Path, texts: list[str] | None = None) -> list[dict]:
    """Extract ``path`` safely to a temp folder and run the handler chain on ``texts``.

    Extraction uses ``tarfile``'s ``data`` filter (no links out, no absolute paths, no device
    files). Then ``model_fn`` -> ``input_fn`` -> ``predict_fn`` -> ``output_fn``, as the container
    calls them.

    Returns:
        The decoded predictions, one ``{"label", "score"}`` per text, in order.

    Raises:
        ArchiveError: the handler returned a different number of predictions or a label that
            is not in the model's ``id2label``.
    """
    texts = texts or ["I love this!", "This is terrible."]
    with tempfile.TemporaryDirectory() as tmp, tarfile.open(path, "r:gz") as tar:
        tar.extractall(tmp, filter="data")
        handler = _load_handler(Path(tmp) / "code")
        model = handler.model_fn(tmp)
        data = handler.input_fn(json.dumps({"inputs": texts}).encode(), "application/json")
        out = json.loads(handler.output_fn(handler.predict_fn(data, model), "application/json"))
        labels = set(
            json.loads((Path(tmp) / "config.json").read_text()).get("id2label", {}).values()
        )
    if len(out) != len(texts):
        raise ArchiveError(f"the handler answered {len(out)} predictions for {len(texts)} texts")
    if labels and not {p["label"] for p in out} <= labels:
        raise ArchiveError(f"the handler answered labels {out} outside id2label {sorted(labels)}")
    return out


# --------------------------------------------------------------------------------------------
# Endpoint
# --------------------------------------------------------------------------------------------


def endpoint_environment(
    instance_type: str,
    vcpus: int | None = None,
    *,
    workers: int | None = None,
    max_batch: int = 64,
) -> dict[str, str]:
    """Container environment: handler location, worker/thread counts and Graviton settings.

    Workers default to one per physical core (``vcpus`` on Graviton, ``vcpus // 2`` on x86),
    each with ``vcpus // workers`` intra-op threads: the throughput set-up of the Graviton
    benchmark notebook (aws/amazon-sagemaker-examples PR #3940: ``OMP_NUM_THREADS=1`` and one
    worker per vCPU on c7g.4xlarge). Graviton settings from the AWS Graviton Technical Guide,
    machinelearning/pytorch.md: ``DNNL_DEFAULT_FPMATH_MODE=BF16`` (bf16 fast-math GEMM kernels;
    Graviton3 and later only, which have bf16), ``LRU_CACHE_CAPACITY=1024`` (oneDNN primitive
    cache), ``THP_MEM_ALLOC_ENABLE=1`` (transparent huge pages).

    Args:
        instance_type: e.g. ``"ml.c7g.xlarge"``.
        vcpus: vCPUs of the instance; default from :func:`instance_vcpus`.
        workers: model-server workers (each loads the model once: memory = workers x model).
        max_batch: texts per request the handler accepts (``PT2AWS_MAX_BATCH``); keep it equal
            to the invoke client's ``max_items``.

    Raises:
        ValueError: ``workers`` or ``max_batch`` below 1.
    """
    vcpus = vcpus or instance_vcpus(instance_type)
    graviton = is_graviton(instance_type)
    workers = workers or max(1, vcpus if graviton else vcpus // 2)
    if workers < 1 or max_batch < 1:
        raise ValueError(f"workers ({workers}) and max_batch ({max_batch}) must be >= 1")
    env = {
        "SAGEMAKER_PROGRAM": "inference.py",
        "SAGEMAKER_SUBMIT_DIRECTORY": "/opt/ml/model/code",
        "SAGEMAKER_CONTAINER_LOG_LEVEL": "20",
        "SAGEMAKER_MODEL_SERVER_WORKERS": str(workers),
        "OMP_NUM_THREADS": str(max(1, vcpus // workers)),
        "PT2AWS_MAX_BATCH": str(max_batch),
        "TOKENIZERS_PARALLELISM": "false",
    }
    if graviton:
        env.update(LRU_CACHE_CAPACITY="1024", THP_MEM_ALLOC_ENABLE="1")
        if GRAVITON_GENERATIONS[instance_family(instance_type)] >= 3:
            env["DNNL_DEFAULT_FPMATH_MODE"] = "BF16"
    return env


_NAME_RE = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$")


def resource_name(prefix: str = "pt2aws") -> str:
    """``<prefix>-<UTC yyyymmdd-HHMMSS>``, within SageMaker's 63-character name limit.

    Raises:
        ValueError: a prefix with characters SageMaker names do not allow.
    """
    name = f"{prefix}-{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}"[:63]
    if not _NAME_RE.match(name):
        raise ValueError(
            f"{prefix!r}: SageMaker names allow letters, digits and single hyphens "
            "(pattern ^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62})"
        )
    return name


def _retrying_client(service: str, region: str, max_attempts: int = 8):
    """A boto3 client with botocore's ``standard`` retry mode (exponential backoff + jitter)."""
    from botocore.config import Config

    from pt2aws.aws import boto_session

    config = Config(retries={"mode": "standard", "total_max_attempts": max_attempts})
    return boto_session(region).client(service, config=config)


@dataclass
class AutoScaling:
    """Target-tracking autoscaling of an endpoint variant (Application Auto Scaling).

    The metric ``SageMakerVariantInvocationsPerInstance`` is invocations per minute per instance
    (AWS docs, "Automatic scaling of Amazon SageMaker AI models"); the cooldowns are the values of
    the huggingface/notebooks ``13_deploy_and_autoscaling_transformers`` example.
    """

    min_instances: int = 1
    max_instances: int = 2
    target_invocations_per_instance: float = 600.0
    scale_in_cooldown_s: int = 300
    scale_out_cooldown_s: int = 60

    def __post_init__(self):
        if not 1 <= self.min_instances <= self.max_instances:
            raise ValueError(
                f"need 1 <= min_instances ({self.min_instances}) <= max_instances ({self.max_instances})"
            )
        if self.target_invocations_per_instance <= 0:
            raise ValueError("target_invocations_per_instance must be > 0 (per minute)")


def scalable_resource_id(endpoint_name: str, variant: str = "AllTraffic") -> str:
    """Application Auto Scaling id of an endpoint variant."""
    return f"endpoint/{endpoint_name}/variant/{variant}"


def enable_autoscaling(
    endpoint_name: str, region: str, config: AutoScaling, variant: str = "AllTraffic"
) -> str:
    """Register the variant as a scalable target and attach a target-tracking policy.

    Returns:
        The scalable target's resource id.
    """
    client = _retrying_client("application-autoscaling", region)
    resource_id = scalable_resource_id(endpoint_name, variant)
    client.register_scalable_target(
        ServiceNamespace="sagemaker",
        ResourceId=resource_id,
        ScalableDimension="sagemaker:variant:DesiredInstanceCount",
        MinCapacity=config.min_instances,
        MaxCapacity=config.max_instances,
    )
    client.put_scaling_policy(
        PolicyName=f"{endpoint_name}-invocations",
        ServiceNamespace="sagemaker",
        ResourceId=resource_id,
        ScalableDimension="sagemaker:variant:DesiredInstanceCount",
        PolicyType="TargetTrackingScaling",
        TargetTrackingScalingPolicyConfiguration={
            "TargetValue": float(config.target_invocations_per_instance),
            "PredefinedMetricSpecification": {
                "PredefinedMetricType": "SageMakerVariantInvocationsPerInstance"
            },
            "ScaleInCooldown": config.scale_in_cooldown_s,
            "ScaleOutCooldown": config.scale_out_cooldown_s,
        },
    )
    return resource_id


def disable_autoscaling(endpoint_name: str, region: str) -> list[str]:
    """Delete the scaling policies and deregister every scalable variant of ``endpoint_name``.

    Returns:
        The resource ids deregistered.
    """
    client = _retrying_client("application-autoscaling", region)
    removed = []
    pages = client.get_paginator("describe_scalable_targets").paginate(ServiceNamespace="sagemaker")
    targets = [t for page in pages for t in page["ScalableTargets"]]
    for target in targets:
        resource_id = target["ResourceId"]
        if not resource_id.startswith(f"endpoint/{endpoint_name}/variant/"):
            continue
        policies = client.describe_scaling_policies(
            ServiceNamespace="sagemaker", ResourceId=resource_id
        )["ScalingPolicies"]
        for policy in policies:
            client.delete_scaling_policy(
                PolicyName=policy["PolicyName"],
                ServiceNamespace="sagemaker",
                ResourceId=resource_id,
                ScalableDimension=policy["ScalableDimension"],
            )
        client.deregister_scalable_target(
            ServiceNamespace="sagemaker",
            ResourceId=resource_id,
            ScalableDimension=target["ScalableDimension"],
        )
        removed.append(resource_id)
    return removed


def _is_not_found(err) -> bool:
    text = str(err).lower()
    return "not found" in text or "could not find" in text or "does not exist" in text


def delete_resources(name: str, region: str) -> list[tuple[str, str]]:
    """Delete the autoscaling, endpoint, endpoint config and model called ``name``.

    Missing resources are skipped; other errors are logged and the next resource is still tried
    (the client retries throttling with backoff).

    Returns:
        The ``(kind, name)`` pairs actually deleted.
    """
    sm = _retrying_client("sagemaker", region)
    deleted = []
    try:
        deleted += [("scalable_target", r) for r in disable_autoscaling(name, region)]
    except Exception as err:  # noqa: BLE001 - clean-up must go on
        logger.error("could not remove autoscaling of %s: %s", name, err)
    for kind, call, key in (
        ("endpoint", sm.delete_endpoint, "EndpointName"),
        ("endpoint_config", sm.delete_endpoint_config, "EndpointConfigName"),
        ("model", sm.delete_model, "ModelName"),
    ):
        try:
            call(**{key: name})
            deleted.append((kind, name))
        except sm.exceptions.ClientError as err:
            if not _is_not_found(err):
                logger.error("could not delete %s %s: %s", kind, name, err)
    return deleted


def wait_for_endpoint(
    name: str,
    region: str,
    *,
    timeout_s: float = 1800,
    poll_s: float | None = None,
    progress: bool = True,
) -> dict:
    """Poll ``DescribeEndpoint`` until ``InService``, showing the status and elapsed seconds.

    Args:
        timeout_s: give up after this many seconds (real endpoints take 5-10 minutes).
        poll_s: seconds between polls; default 15 (1 for timeouts under a minute).
        progress: show a tqdm bar (notebook or terminal) with the status.

    Returns:
        The last ``DescribeEndpoint`` response.

    Raises:
        DeploymentError: status ``Failed`` (with SageMaker's ``FailureReason``).
        TimeoutError: not ``InService`` within ``timeout_s``.
    """
    from tqdm.auto import tqdm

    sm = _retrying_client("sagemaker", region)
    poll_s = poll_s or (1 if timeout_s < 60 else 15)
    start = time.monotonic()
    bar = tqdm(total=int(timeout_s), unit="s", desc=f"{name}", disable=not progress, leave=True)
    try:
        while True:
            described = sm.describe_endpoint(EndpointName=name)
            status = described["EndpointStatus"]
            elapsed = time.monotonic() - start
            bar.set_postfix_str(status)
            bar.n = min(int(elapsed), int(timeout_s))
            bar.refresh()
            if status == "InService":
                return described
            if status in ("Failed", "OutOfService", "RollingBack", "UpdateRollbackFailed"):
                raise DeploymentError(
                    f"endpoint {name} is {status}: {described.get('FailureReason', 'no reason given')} "
                    f"(logs: CloudWatch /aws/sagemaker/Endpoints/{name})"
                )
            if elapsed + poll_s > timeout_s:
                raise TimeoutError(
                    f"endpoint {name} still {status} after {elapsed:.0f} s (timeout {timeout_s:.0f} s); "
                    f"see CloudWatch /aws/sagemaker/Endpoints/{name}"
                )
            time.sleep(poll_s)
    finally:
        bar.close()


@dataclass
class Deployment:
    """What :func:`deployed_endpoint` created; ``deleted`` lists what clean-up removed."""

    name: str
    region: str
    instance_type: str
    image_uri: str
    model_data_url: str
    environment: dict = field(default_factory=dict)
    endpoint: object = None  # sagemaker.core.resources.Endpoint
    autoscaling_target: str | None = None
    created: list[tuple[str, str]] = field(default_factory=list)
    deleted: list[tuple[str, str]] = field(default_factory=list)

    def invoke(
        self,
        body: str | bytes,
        content_type: str = "application/json",
        accept: str = "application/json",
    ) -> str:
        """Send one request to the endpoint; returns the response body as text (UTF-8)."""
        body = body.encode("utf-8") if isinstance(body, str) else body
        payload, _ = self.client().invoke_raw(body, content_type, accept)
        return payload.decode("utf-8")

    def client(self, **kwargs):
        """An :class:`pt2aws.invoke.EndpointClient` for this endpoint (chunking, retries)."""
        from pt2aws.invoke import EndpointClient

        kwargs.setdefault("max_items", int(self.environment.get("PT2AWS_MAX_BATCH", 64)))
        return EndpointClient(self.name, region=self.region, **kwargs)

    def predict(self, texts: list[str], **kwargs) -> list[dict]:
        """Classify ``texts`` (any number): split into requests under the payload limit."""
        return self.client(**kwargs).predict(texts)


def upload_model(archive: str | Path, bucket: str, key: str, region: str) -> str:
    """Upload ``archive`` to ``s3://bucket/key`` with SSE-S3 encryption; returns the S3 URL.

    Creates the bucket (SSE-S3 default encryption, public access blocked) if it does not exist.
    """
    from pt2aws.aws import boto_session

    s3 = boto_session(region).client("s3")
    try:
        s3.head_bucket(Bucket=bucket)
    except s3.exceptions.ClientError:
        kwargs = (
            {}
            if region == "us-east-1"
            else {"CreateBucketConfiguration": {"LocationConstraint": region}}
        )
        s3.create_bucket(Bucket=bucket, **kwargs)
        s3.put_public_access_block(
            Bucket=bucket,
            PublicAccessBlockConfiguration={
                "BlockPublicAcls": True,
                "IgnorePublicAcls": True,
                "BlockPublicPolicy": True,
                "RestrictPublicBuckets": True,
            },
        )
    s3.upload_file(str(archive), bucket, key, ExtraArgs={"ServerSideEncryption": "AES256"})
    return f"s3://{bucket}/{key}"


def default_bucket(region: str) -> str:
    """SageMaker's default bucket name for this account and region: ``sagemaker-<region>-<account>``."""
    from pt2aws.aws import boto_session

    account = boto_session(region).client("sts").get_caller_identity()["Account"]
    return f"sagemaker-{region}-{account}"


@contextlib.contextmanager
def deployed_endpoint(
    model_data_url: str,
    *,
    role_arn: str,
    region: str,
    instance_type: str = DEFAULT_INSTANCE_TYPE,
    image_uri: str | None = None,
    torch_version: str = DEFAULT_TORCH_VERSION,
    name: str | None = None,
    wait_timeout_s: int = 1800,
    poll_s: float | None = None,
    progress: bool = False,
    tags: dict[str, str] | None = None,
    environment: dict[str, str] | None = None,
    autoscaling: AutoScaling | None = None,
):
    """Create model, endpoint config and endpoint; yield a :class:`Deployment`; always delete them.

    Image and instance are checked before any AWS call. Clean-up runs in ``finally``: after
    success, after an exception in the ``with`` body, and after a failure part-way through
    creation (including the autoscaling set-up), so nothing billable is left behind.

    Args:
        model_data_url: ``s3://`` URL of ``model.tar.gz`` (see :func:`upload_model`).
        role_arn: SageMaker execution role.
        region: AWS region.
        instance_type: hosting instance type (default ``ml.c7g.xlarge``, Graviton3, 4 vCPUs).
        image_uri: default :func:`inference_image_uri` for ``torch_version``.
        name: resource name for model, config and endpoint; default :func:`resource_name`.
        wait_timeout_s: seconds to wait for ``InService``.
        progress: show the wait as a progress bar.
        tags: extra tags; ``project=pt2aws`` and ``pt2aws:created-at`` are always set.
        environment: overrides of :func:`endpoint_environment`.
        autoscaling: target-tracking autoscaling; removed on clean-up.

    Raises:
        ImageSelectionError: see :func:`inference_image_uri` (before any AWS call).
        DeploymentError, TimeoutError: see :func:`wait_for_endpoint`.
    """
    check_instance_type(instance_type)
    image_uri = image_uri or inference_image_uri(region, torch_version, instance_type)
    check_image_matches_instance(image_uri, instance_type)
    name = name or resource_name()
    if not _NAME_RE.match(name):
        raise ValueError(f"{name!r} is not a valid SageMaker name (letters, digits, hyphens)")

    from sagemaker.core.resources import Endpoint, EndpointConfig, Model
    from sagemaker.core.shapes import ContainerDefinition, ProductionVariant, Tag

    from pt2aws.aws import boto_session

    env = {**endpoint_environment(instance_type), **(environment or {})}
    created_at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    all_tags = {"project": "pt2aws", "pt2aws:created-at": created_at, **(tags or {})}
    tag_list = [Tag(key=k, value=v) for k, v in all_tags.items()]
    session = boto_session(region)
    deployment = Deployment(
        name=name,
        region=region,
        instance_type=instance_type,
        image_uri=image_uri,
        model_data_url=model_data_url,
        environment=env,
    )
    try:
        Model.create(
            model_name=name,
            execution_role_arn=role_arn,
            tags=tag_list,
            session=session,
            region=region,
            primary_container=ContainerDefinition(
                image=image_uri, model_data_url=model_data_url, environment=env
            ),
        )
        deployment.created.append(("model", name))
        EndpointConfig.create(
            endpoint_config_name=name,
            tags=tag_list,
            session=session,
            region=region,
            production_variants=[
                ProductionVariant(
                    variant_name="AllTraffic",
                    model_name=name,
                    initial_instance_count=autoscaling.min_instances if autoscaling else 1,
                    instance_type=instance_type,
                )
            ],
        )
        deployment.created.append(("endpoint_config", name))
        deployment.endpoint = Endpoint.create(
            endpoint_name=name,
            endpoint_config_name=name,
            tags=tag_list,
            session=session,
            region=region,
        )
        deployment.created.append(("endpoint", name))
        wait_for_endpoint(name, region, timeout_s=wait_timeout_s, poll_s=poll_s, progress=progress)
        if autoscaling:
            deployment.autoscaling_target = enable_autoscaling(name, region, autoscaling)
            deployment.created.append(("scalable_target", deployment.autoscaling_target))
        yield deployment
    finally:
        deployment.deleted = delete_resources(name, region)
        logger.info("deleted %s", deployment.deleted)
