"""``model.tar.gz`` for SageMaker: package it, check it offline, upload it to S3.

The contract of the SageMaker PyTorch inference container (aws/sagemaker-pytorch-inference-
toolkit): model files at the archive root, the handler in ``code/inference.py`` and its extra
packages in ``code/requirements.txt``, which the AWS DLC pip-installs at start. Each step fails
loudly, before anything is billed, on the mistakes public issue trackers show people making
(``../shared/notes/aws-reference-notes.md`` section 3): a nested top folder, the handler at the
root, a tokenizer left out, symlinks, absolute or ``..`` paths (:func:`package` cannot produce
them; :func:`validate_archive` rejects them and then loads the model and predicts, with no AWS).
"""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import logging
import re
import tarfile
import tempfile
from importlib import metadata
from pathlib import Path

from pt2aws.serving import HANDLER_PATH
from pt2aws.serving.service import load_handler

logger = logging.getLogger(__name__)


#: The fast variants' agreement with fp32, measured at packaging (the handler reads it).
VARIANTS_FILE = "variants.json"
#: The long-text windows module the handler imports from ``code/`` (no pt2aws in the DLC).
WINDOWS_MODULE = "pt2aws_windows"
WINDOWS_PATH = Path(__file__).resolve().parents[1] / "data" / "windows.py"


class ArchiveError(ValueError):
    """``model.tar.gz`` breaks the SageMaker layout; the message names the member and the fix."""


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
    model_dir: str | Path,
    output_path: str | Path,
    *,
    handler: str | Path = HANDLER_PATH,
    variants: dict | None = None,
) -> Path:
    """Write ``model.tar.gz``: the files of ``model_dir`` at the root plus ``code/``.

    ``code/inference.py`` is ``handler``, ``code/pt2aws_windows.py`` the long-text windows it
    imports (:mod:`pt2aws.data.windows`, standard library only); ``code/requirements.txt`` comes
    from :func:`requirements_for`. ``variants`` (:func:`pt2aws.inference.selection.variant_report`:
    each fast variant's agreement with fp32 on the validation split) is written as
    ``variants.json`` at the root, where the handler's ``PT2AWS_VARIANT=auto`` reads it. Symlinks to files are dereferenced (the HF cache uses them; a tar
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
        # the handler's long-text windows (standard library only): the toolkit puts code/ on
        # sys.path, so the handler imports it there without pt2aws installed
        (f"code/{WINDOWS_MODULE}.py", WINDOWS_PATH.read_bytes()),
        ("code/requirements.txt", requirements_for(model_dir).encode()),
    ]
    if variants is not None:
        members.append((VARIANTS_FILE, json.dumps(variants, indent=1).encode()))
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
            "pt2aws.aws.artifact.package, which dereferences them"
        )
    if name.startswith("/") or re.match(r"^[A-Za-z]:[\\/]", name):
        raise ArchiveError(
            f"{name}: absolute path; members must be relative to the archive root "
            "(tar -C model_dir -czf model.tar.gz .)"
        )
    if ".." in Path(name).parts:
        raise ArchiveError(
            f"{name}: '..' path escapes the archive root; rebuild with pt2aws.aws.artifact.package"
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
            else "; save the model with save_pretrained and rebuild with "
            "pt2aws.aws.artifact.package"
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


def smoke_test_archive(path: str | Path, texts: list[str] | None = None) -> list[dict]:
    """Extract ``path`` safely to a temp folder and run the handler chain on ``texts``.

    Extraction uses ``tarfile``'s ``data`` filter (no links out, no absolute paths, no device
    files). Then the archive's handler, loaded as the container loads it
    (:func:`pt2aws.serving.service.load_handler`), runs ``model_fn`` -> ``input_fn`` ->
    ``predict_fn`` -> ``output_fn``, as the container calls them.

    Returns:
        The decoded predictions, one ``{"label", "score"}`` per text, in order.

    Raises:
        ArchiveError: the handler returned a different number of predictions or a label that
            is not in the model's ``id2label``.
    """
    texts = texts or ["I love this!", "This is terrible."]
    with tempfile.TemporaryDirectory() as tmp, tarfile.open(path, "r:gz") as tar:
        tar.extractall(tmp, filter="data")
        handler = load_handler(tmp, builtin=False)
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


def upload_archive(session, archive: str | Path, url: str) -> str:
    """Upload ``archive`` to ``url`` (``s3://bucket/key``) with SSE-S3 encryption.

    Creates the bucket (public access blocked) if it does not exist.

    Args:
        session: the :class:`pt2aws.aws.session.AwsSession` (its region is the bucket's).
        archive: the ``model.tar.gz`` to upload.
        url: ``s3://<bucket>/<key>``, e.g. ``s3://sagemaker-<region>-<account>/pt2aws/<name>/
            model.tar.gz`` (:func:`pt2aws.aws.session.default_bucket`).

    Returns:
        ``url``.
    """
    bucket, key = url.removeprefix("s3://").split("/", 1)
    s3 = session.client("s3")
    try:
        s3.head_bucket(Bucket=bucket)
    except s3.exceptions.ClientError:
        kwargs = (
            {}
            if session.region == "us-east-1"
            else {"CreateBucketConfiguration": {"LocationConstraint": session.region}}
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


def delete_uploaded(session, url: str) -> bool:
    """Delete the S3 object ``url`` (``s3://bucket/key``); errors are logged, not raised.

    Returns:
        True when the delete request succeeded.
    """
    from botocore.exceptions import ClientError

    bucket, key = url.removeprefix("s3://").split("/", 1)
    try:
        session.client("s3").delete_object(Bucket=bucket, Key=key)
    except ClientError as err:  # clean-up goes on; the caller records False
        logger.error("could not delete %s: %s", url, err)
        return False
    return True
