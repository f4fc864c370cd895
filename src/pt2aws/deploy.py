"""Package a trained model for SageMaker, deploy it to a Graviton endpoint, invoke it, clean up.

The ``model.tar.gz`` contract of the SageMaker PyTorch inference container (see
aws/sagemaker-pytorch-inference-toolkit): model files at the archive root, the handler in
``code/inference.py`` and its extra packages in ``code/requirements.txt``, which the container
pip-installs at start.
"""

from __future__ import annotations

import contextlib
import io
import logging
import tarfile
import tempfile
import time
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

from pt2aws.serving import HANDLER_PATH

logger = logging.getLogger(__name__)

#: Graviton (arm64) instance families that SageMaker real-time hosting accepts (botocore
#: ``ProductionVariantInstanceType`` enum, botocore 1.44.8).
GRAVITON_FAMILIES = (
    "c6g",
    "c6gd",
    "c6gn",
    "c7g",
    "c8g",
    "m6g",
    "m6gd",
    "m8g",
    "r6g",
    "r6gd",
    "r7gd",
    "r8g",
)
#: PyTorch versions with a SageMaker arm64 inference DLC, and their Python version
#: (aws/deep-learning-containers available_images.md; from 2.5 the repository is
#: ``pytorch-inference-arm64``, before that ``pytorch-inference-graviton``).
GRAVITON_PYTORCH_VERSIONS = {
    "2.0.1": "py310",
    "2.1.0": "py310",
    "2.2.1": "py310",
    "2.3.0": "py311",
    "2.4.0": "py311",
    "2.6.0": "py312",
}
DEFAULT_TORCH_VERSION = "2.6.0"
DEFAULT_INSTANCE_TYPE = "ml.c7g.xlarge"
TOKENIZER_FILES = (
    "tokenizer.json",
    "vocab.json",
    "vocab.txt",
    "spiece.model",
    "sentencepiece.bpe.model",
)
WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin", "model.safetensors.index.json")


class ArchiveError(ValueError):
    """``model.tar.gz`` breaks the SageMaker layout; the message names the member and the fix."""


class ImageSelectionError(ValueError):
    """No inference image matches the requested instance type and PyTorch version."""


def instance_family(instance_type: str) -> str:
    """``"ml.c7g.xlarge"`` -> ``"c7g"``.

    Raises:
        ValueError: not of the form ``ml.<family>.<size>``.
    """
    parts = instance_type.split(".")
    if len(parts) != 3 or parts[0] != "ml":
        raise ValueError(
            f"instance type {instance_type!r} is not of the form ml.<family>.<size>, e.g. ml.c7g.xlarge"
        )
    return parts[1]


def is_graviton(instance_type: str) -> bool:
    """True for Graviton (arm64) SageMaker instance types."""
    return instance_family(instance_type) in GRAVITON_FAMILIES


def inference_image_uri(
    region: str,
    instance_type: str = DEFAULT_INSTANCE_TYPE,
    torch_version: str = DEFAULT_TORCH_VERSION,
) -> str:
    """ECR URI of the SageMaker PyTorch inference DLC for ``instance_type`` (CPU images).

    Graviton instances get the arm64 image through the SDK's ``image_uris`` with
    ``image_scope="inference_graviton"`` (the SDK's own Graviton family list misses c8g/m8g/r8g/r7gd,
    so the scope is forced here); other instances get the x86 CPU image.

    Raises:
        ImageSelectionError: unknown PyTorch version for Graviton, or an image whose
            architecture does not match the instance family.
    """
    graviton = is_graviton(instance_type)
    if graviton and torch_version not in GRAVITON_PYTORCH_VERSIONS:
        raise ImageSelectionError(
            f"no SageMaker arm64 PyTorch inference image for torch {torch_version} on {instance_type} "
            f"(family {instance_family(instance_type)}, arm64); supported: {', '.join(GRAVITON_PYTORCH_VERSIONS)}"
        )
    from sagemaker.core import image_uris

    uri = image_uris.retrieve(
        "pytorch",
        region,
        version=torch_version,
        py_version=GRAVITON_PYTORCH_VERSIONS.get(torch_version),
        instance_type=instance_type,
        image_scope="inference_graviton" if graviton else "inference",
    )
    arm_image = "arm64" in uri or "graviton" in uri
    if arm_image != graviton:
        raise ImageSelectionError(
            f"image {uri} is {'arm64' if arm_image else 'x86'} but {instance_type} is "
            f"{'arm64 (Graviton)' if graviton else 'x86'}"
        )
    return uri


def _requirements() -> str:
    lines = []
    for package in ("transformers", "tokenizers", "safetensors"):
        try:
            lines.append(f"{package}=={metadata.version(package)}")
        except metadata.PackageNotFoundError:
            pass
    return "\n".join(lines) + "\n"


def package(
    model_dir: str | Path, output_path: str | Path, *, handler: str | Path = HANDLER_PATH
) -> Path:
    """Write ``model.tar.gz``: the files of ``model_dir`` at the root plus ``code/``.

    ``code/inference.py`` is ``handler``; ``code/requirements.txt`` pins transformers, tokenizers
    and safetensors to the versions installed here (the ones that saved the model). Symlinks are
    dereferenced; members are sorted and time-stamped 0, so the same inputs give the same bytes.

    Returns:
        The archive's path.

    Raises:
        FileNotFoundError: ``model_dir`` has no ``config.json``.
    """
    model_dir, output_path = Path(model_dir), Path(output_path)
    if not (model_dir / "config.json").is_file():
        raise FileNotFoundError(
            f"{model_dir} has no config.json: pass the folder written by save_pretrained"
        )
    output_path.parent.mkdir(parents=True, exist_ok=True)
    members: list[tuple[str, bytes]] = [
        (p.relative_to(model_dir).as_posix(), p.resolve().read_bytes())
        for p in sorted(model_dir.rglob("*"))
        if p.is_file() and p.relative_to(model_dir).parts[0] != "code"
    ]
    members += [
        ("code/inference.py", Path(handler).read_bytes()),
        ("code/requirements.txt", _requirements().encode()),
    ]
    import gzip

    with (
        open(output_path, "wb") as raw,
        gzip.GzipFile(filename="", fileobj=raw, mode="wb", mtime=0) as gz,
        tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar,
    ):
        for name, data in sorted(members):
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.mode = len(data), 0, 0o644
            tar.addfile(info, io.BytesIO(data))
    return output_path


def validate_archive(path: str | Path, *, smoke_test: bool = True) -> dict:
    """Check ``model.tar.gz`` against the SageMaker layout, then (optionally) load and predict.

    Returns:
        ``{"members": [...], "bytes": int, "prediction": [...] | None}``.

    Raises:
        ArchiveError: a nested top folder, handler outside ``code/``, missing config, weights or
            tokenizer, symlinks/hard links, absolute or ``..`` paths; each names the member and
            the fix.
    """
    path = Path(path)
    with tarfile.open(path, "r:gz") as tar:
        infos = tar.getmembers()
    names = [i.name.removeprefix("./") for i in infos if not i.isdir()]
    for info in infos:
        if info.issym() or info.islnk():
            raise ArchiveError(
                f"{info.name}: links are not allowed; rebuild with pt2aws.deploy.package (it dereferences)"
            )
        if info.name.startswith("/") or ".." in Path(info.name).parts:
            raise ArchiveError(
                f"{info.name}: absolute or '..' path; members must be relative to the archive root"
            )
    if "config.json" not in names:
        tops = {n.split("/")[0] for n in names if "/" in n and n.split("/")[0] != "code"}
        hint = (
            f" (found under {sorted(tops)[0]}/: the files are nested; tar from inside the folder: tar -C dir .)"
            if tops
            else ""
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
    if not any(n in names for n in WEIGHT_FILES):
        raise ArchiveError(f"no weights at the root: expected one of {WEIGHT_FILES}")
    if not any(n in names for n in TOKENIZER_FILES):
        raise ArchiveError(
            f"no tokenizer at the root: expected one of {TOKENIZER_FILES}; save the tokenizer with the model"
        )
    result = {"members": sorted(names), "bytes": path.stat().st_size, "prediction": None}
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

    Returns the decoded predictions (a list of ``{"label", "score"}``).
    """
    import json

    texts = texts or ["I love this!", "This is terrible."]
    with tempfile.TemporaryDirectory() as tmp, tarfile.open(path, "r:gz") as tar:
        tar.extractall(tmp, filter="data")
        handler = _load_handler(Path(tmp) / "code")
        model = handler.model_fn(tmp)
        data = handler.input_fn(json.dumps({"inputs": texts}).encode(), "application/json")
        return json.loads(handler.output_fn(handler.predict_fn(data, model), "application/json"))


def endpoint_environment(instance_type: str, vcpus: int | None = None) -> dict[str, str]:
    """Container environment for the endpoint: handler location plus Graviton runtime settings.

    Graviton settings from the AWS Graviton Technical Guide, machinelearning/pytorch.md:
    ``DNNL_DEFAULT_FPMATH_MODE=BF16`` (bf16 fast-math kernels on Graviton3+),
    ``LRU_CACHE_CAPACITY=1024`` (oneDNN primitive cache), ``THP_MEM_ALLOC_ENABLE=1`` (transparent
    huge pages). One model-server worker with all vCPUs as threads.
    """
    env = {
        "SAGEMAKER_PROGRAM": "inference.py",
        "SAGEMAKER_SUBMIT_DIRECTORY": "/opt/ml/model/code",
        "SAGEMAKER_CONTAINER_LOG_LEVEL": "20",
        "SAGEMAKER_MODEL_SERVER_WORKERS": "1",
    }
    if vcpus:
        env["OMP_NUM_THREADS"] = str(vcpus)
    if is_graviton(instance_type):
        env.update(
            DNNL_DEFAULT_FPMATH_MODE="BF16", LRU_CACHE_CAPACITY="1024", THP_MEM_ALLOC_ENABLE="1"
        )
    return env


def resource_name(prefix: str = "pt2aws") -> str:
    """``<prefix>-<UTC yyyymmdd-HHMMSS>``, within SageMaker's 63-character limit."""
    return f"{prefix}-{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}"[:63]


@dataclass
class Deployment:
    """What :func:`deployed_endpoint` created; ``deleted`` lists what clean-up removed."""

    name: str
    region: str
    instance_type: str
    image_uri: str
    model_data_url: str
    endpoint: object = None  # sagemaker.core.resources.Endpoint
    created: list[tuple[str, str]] = field(default_factory=list)
    deleted: list[tuple[str, str]] = field(default_factory=list)

    def invoke(
        self,
        body: str | bytes,
        content_type: str = "application/json",
        accept: str = "application/json",
    ) -> str:
        """Send one request to the endpoint; returns the response body as text."""
        response = self.endpoint.invoke(body=body, content_type=content_type, accept=accept)
        payload = response.body
        payload = payload.read() if hasattr(payload, "read") else payload
        return payload.decode() if isinstance(payload, bytes) else str(payload)


def upload_model(archive: str | Path, bucket: str, key: str, region: str) -> str:
    """Upload ``archive`` to ``s3://bucket/key`` with SSE-S3 encryption; returns the S3 URL.

    Creates the bucket if it does not exist.
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
    s3.upload_file(str(archive), bucket, key, ExtraArgs={"ServerSideEncryption": "AES256"})
    return f"s3://{bucket}/{key}"


def default_bucket(region: str) -> str:
    """SageMaker's default bucket name for this account and region: ``sagemaker-<region>-<account>``."""
    from pt2aws.aws import boto_session

    account = boto_session(region).client("sts").get_caller_identity()["Account"]
    return f"sagemaker-{region}-{account}"


def delete_resources(name: str, region: str) -> list[tuple[str, str]]:
    """Delete the endpoint, endpoint config and model called ``name``, ignoring those missing.

    Returns the ``(kind, name)`` pairs actually deleted.
    """
    from pt2aws.aws import boto_session

    sm = boto_session(region).client("sagemaker")
    deleted = []
    for kind, call, key in (
        ("endpoint", sm.delete_endpoint, "EndpointName"),
        ("endpoint_config", sm.delete_endpoint_config, "EndpointConfigName"),
        ("model", sm.delete_model, "ModelName"),
    ):
        try:
            call(**{key: name})
            deleted.append((kind, name))
        except sm.exceptions.ClientError as err:
            if "not found" not in str(err).lower() and "could not find" not in str(err).lower():
                logger.error("could not delete %s %s: %s", kind, name, err)
    return deleted


@contextlib.contextmanager
def deployed_endpoint(
    model_data_url: str,
    *,
    role_arn: str,
    region: str,
    instance_type: str = DEFAULT_INSTANCE_TYPE,
    image_uri: str | None = None,
    name: str | None = None,
    wait_timeout_s: int = 1800,
    tags: dict[str, str] | None = None,
):
    """Create model, endpoint config and endpoint; yield a :class:`Deployment`; always delete them.

    Clean-up runs in ``finally``: after success, after an exception in the ``with`` body, and
    after a failure part-way through creation, so nothing billable is left behind.

    Raises:
        ImageSelectionError: see :func:`inference_image_uri` (before any AWS call).
        TimeoutError: the endpoint is not ``InService`` within ``wait_timeout_s`` seconds.
    """
    from sagemaker.core.resources import Endpoint, EndpointConfig, Model
    from sagemaker.core.shapes import ContainerDefinition, ProductionVariant, Tag

    from pt2aws.aws import boto_session

    image_uri = image_uri or inference_image_uri(region, instance_type)
    name = name or resource_name()
    session = boto_session(region)
    tag_list = [Tag(key=k, value=v) for k, v in {"project": "pt2aws", **(tags or {})}.items()]
    deployment = Deployment(
        name=name,
        region=region,
        instance_type=instance_type,
        image_uri=image_uri,
        model_data_url=model_data_url,
    )
    try:
        Model.create(
            model_name=name,
            execution_role_arn=role_arn,
            tags=tag_list,
            session=session,
            region=region,
            primary_container=ContainerDefinition(
                image=image_uri,
                model_data_url=model_data_url,
                environment=endpoint_environment(instance_type),
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
                    initial_instance_count=1,
                    instance_type=instance_type,
                )
            ],
        )
        deployment.created.append(("endpoint_config", name))
        endpoint = Endpoint.create(
            endpoint_name=name,
            endpoint_config_name=name,
            tags=tag_list,
            session=session,
            region=region,
        )
        deployment.created.append(("endpoint", name))
        endpoint.wait_for_status(
            "InService", poll=5 if wait_timeout_s > 60 else 1, timeout=wait_timeout_s
        )
        deployment.endpoint = endpoint
        yield deployment
    finally:
        deployment.deleted = delete_resources(name, region)
        logger.info("deleted %s", deployment.deleted)
