"""``model.tar.gz`` for SageMaker, packaged, checked offline, uploaded. The PyTorch inference
toolkit's layout: model files at the root, ``code/inference.py``, ``code/requirements.txt``."""

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

from pt2aws.errors import UserError
from pt2aws.inference.ort import ONNX_DIR
from pt2aws.serving import HANDLER_PATH
from pt2aws.serving.server import load_handler

logger = logging.getLogger(__name__)

#: The fast variants' agreement with fp32, measured at packaging (the handler reads it).
VARIANTS_FILE = "variants.json"
TOKENIZER_FILES = ("tokenizer.json", "vocab.json", "vocab.txt", "spiece.model",
                   "sentencepiece.bpe.model")  # fmt: skip
WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin", "model.safetensors.index.json")
#: Pinned beside transformers in ``code/requirements.txt``; not torch: the DLC brings its own.
COMPANION_PACKAGES = ("tokenizers", "safetensors")


_REBUILD = "rebuild with pt2aws.aws.artifact.package"
#: ``(test, what is wrong)`` for each member SageMaker cannot extract safely, in order.
MEMBER_RULES = (
    (tarfile.TarInfo.issym, "symlink to {0!r}; links are not allowed (SageMaker fails to extract "
     "them); " + _REBUILD + ", which dereferences them"),
    (tarfile.TarInfo.islnk, "hard link to {0!r}; links are not allowed; " + _REBUILD),
    (lambda i: i.name.startswith("/") or re.match(r"^[A-Za-z]:[\\/]", i.name), "absolute path; "
     "members must be relative to the archive root (tar -C model_dir -czf model.tar.gz .)"),
    (lambda i: ".." in Path(i.name).parts, "'..' path escapes the archive root; " + _REBUILD),
    (lambda i: not (i.isfile() or i.isdir()), "not a regular file (device or fifo); remove it"),
)  # fmt: skip


class ArchiveError(UserError, ValueError):
    """``model.tar.gz`` breaks the SageMaker layout; the message names the member and the fix."""


def requirements_for(model_dir: str | Path) -> str:
    """``transformers`` at the saving version, tokenizers/safetensors pinned when it is installed."""
    saved = json.loads((Path(model_dir) / "config.json").read_text()).get("transformers_version")
    installed = metadata.version("transformers")
    lines = [f"transformers=={saved or installed}"]
    if (saved or installed) == installed:
        for name in COMPANION_PACKAGES:
            with contextlib.suppress(metadata.PackageNotFoundError):
                lines.append(f"{name}=={metadata.version(name)}")
    return "\n".join(lines) + "\n"


def _model_files(model_dir: Path, with_onnx: bool) -> list[tuple[str, Path]]:
    files = []
    for path in sorted(model_dir.rglob("*")):
        rel = path.relative_to(model_dir)
        if rel.parts[0] == "code" or any(part.startswith(".") for part in rel.parts):
            continue  # our handler replaces code/; skip .ipynb_checkpoints and the like
        if rel.parts[0] == ONNX_DIR and not with_onnx:
            continue  # the ONNX exports ship only when variants.json records them
        if path.is_symlink() and not path.exists():
            raise ArchiveError(f"{rel}: broken symlink to {path.readlink()}; fix or remove it")
        if path.is_symlink() and path.is_dir():
            raise ArchiveError(
                f"{rel}: symlinked folder; copy it in (save_pretrained writes files)"
            )
        if path.is_file():
            files.append((rel.as_posix(), path))
    return files


def _check_layout(names: set[str]) -> None:
    """``ArchiveError`` for a layout the SageMaker PyTorch container cannot serve."""
    if "config.json" not in names:
        nested = sorted(n.split("/")[0] for n in names if n.endswith("/config.json"))
        hint = (
            f": found {nested[0]}/config.json, the files are nested in a top folder; "
            f"tar from inside it (tar -C {nested[0]} -czf model.tar.gz .)"
            if nested
            else "; save the model with save_pretrained and rebuild with pt2aws.aws.artifact.package"
        )
        raise ArchiveError(f"config.json missing at the archive root{hint}")
    checks = [
        ("inference.py" in names, "inference.py at the root: the toolkit loads code/inference.py;"
         " move it to code/"),
        ("code/inference.py" not in names, "code/inference.py missing: add the handler "
         "(pt2aws.serving.HANDLER_PATH)"),
        ("code/requirements.txt" not in names, "code/requirements.txt missing: the PyTorch DLC "
         "has no transformers; add code/requirements.txt with transformers==<the version that "
         "saved the model>"),
        (not names & set(WEIGHT_FILES), f"no weights at the root: expected one of {WEIGHT_FILES}"),
        (not names & set(TOKENIZER_FILES), f"no tokenizer at the root: expected one of "
         f"{TOKENIZER_FILES}; save the tokenizer with the model (tokenizer.save_pretrained(model_dir))"),
    ]  # fmt: skip
    if message := next((message for failed, message in checks if failed), None):
        raise ArchiveError(message)


def package(
    model_dir: str | Path, output_path: str | Path, *, variants: dict | None = None
) -> Path:
    """Write ``model.tar.gz``: ``model_dir``'s files, the handler, requirements, ``variants.json``
    (``onnx/`` when it records ONNX), links dereferenced, same inputs same bytes.
    ``FileNotFoundError``: no ``config.json``; ``ArchiveError``: a layout SageMaker refuses."""
    model_dir, output_path = Path(model_dir), Path(output_path)
    if not (model_dir / "config.json").is_file():
        raise FileNotFoundError(
            f"{model_dir} has no config.json: pass the folder written by save_pretrained"
        )
    files = _model_files(model_dir, with_onnx=bool(variants and variants.get("onnx")))
    names = {name for name, _ in files}
    _check_layout(names | {"code/inference.py", "code/requirements.txt"})
    if "model.safetensors" in names:
        from safetensors import safe_open

        with safe_open(str(model_dir / "model.safetensors"), framework="pt") as f:
            compiled = [k for k in f.keys() if k.startswith("_orig_mod.")]
        if compiled:
            raise ArchiveError(
                f"model.safetensors: {len(compiled)} keys start with '_orig_mod.' (weights saved "
                "from a torch.compile wrapper); save the unwrapped model "
                "(model._orig_mod.save_pretrained)"
            )
    members = [(name, path.read_bytes()) for name, path in files] + [
        ("code/inference.py", Path(HANDLER_PATH).read_bytes()),
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
    return output_path


def validate_archive(path: str | Path, *, smoke_test: bool = True) -> dict:
    """Check ``model.tar.gz`` (``ArchiveError`` naming the member and the fix), then
    :func:`smoke_test_archive`: ``{"members", "member_count", "bytes", "requirements", "prediction"}``."""
    path = Path(path)
    try:
        with tarfile.open(path, "r:gz") as tar:
            infos = tar.getmembers()
            for info in infos:
                for broken, why in MEMBER_RULES:
                    if broken(info):
                        raise ArchiveError(f"{info.name}: {why.format(info.linkname)}")
            files = {i.name.removeprefix("./"): i for i in infos if not i.isdir()}
            requirements = files.get("code/requirements.txt")
            requirements = tar.extractfile(requirements).read().decode() if requirements else ""
    except (tarfile.TarError, OSError, EOFError) as err:
        raise ArchiveError(f"{path}: not a readable .tar.gz ({err}); rebuild it") from None
    names = sorted(files)
    _check_layout(set(names))
    return {
        "members": names, "member_count": len(names), "bytes": path.stat().st_size,
        "requirements": requirements,
        "prediction": smoke_test_archive(path) if smoke_test else None,
    }  # fmt: skip


def smoke_test_archive(path: str | Path, texts: list[str] | None = None) -> list[dict]:
    """Run the archive's handler as the container does: one ``{"label", "score"}`` per text;
    ``ArchiveError``: another number of predictions, a label outside ``id2label``."""
    texts = texts or ["I love this!", "This is terrible."]
    with tempfile.TemporaryDirectory() as tmp, tarfile.open(path, "r:gz") as tar:
        tar.extractall(tmp, filter="data")
        handler = load_handler(tmp, builtin=False)
        model = handler.model_fn(tmp)
        data = handler.input_fn(json.dumps({"inputs": texts}).encode(), "application/json")
        out = json.loads(handler.output_fn(handler.predict_fn(data, model), "application/json"))
        config = json.loads((Path(tmp) / "config.json").read_text())
    labels = set(config.get("id2label", {}).values())
    if len(out) != len(texts):
        raise ArchiveError(f"the handler answered {len(out)} predictions for {len(texts)} texts")
    if labels and not {p["label"] for p in out} <= labels:
        raise ArchiveError(f"the handler answered labels {out} outside id2label {sorted(labels)}")
    return out


def upload_archive(session, archive: str | Path, url: str) -> str:
    """Upload ``archive`` to ``url`` (SSE-S3), creating the bucket (public access blocked); ``url``."""
    bucket, key = url.removeprefix("s3://").split("/", 1)
    s3 = session.client("s3")
    try:
        s3.head_bucket(Bucket=bucket)
    except s3.exceptions.ClientError:
        where = {"LocationConstraint": session.region} if session.region != "us-east-1" else None
        s3.create_bucket(Bucket=bucket, **({"CreateBucketConfiguration": where} if where else {}))
        block = dict.fromkeys(("BlockPublicAcls", "IgnorePublicAcls", "BlockPublicPolicy",
                               "RestrictPublicBuckets"), True)  # fmt: skip
        s3.put_public_access_block(Bucket=bucket, PublicAccessBlockConfiguration=block)
    s3.upload_file(str(archive), bucket, key, ExtraArgs={"ServerSideEncryption": "AES256"})
    return url


def delete_uploaded(session, url: str) -> bool:
    """Delete the S3 object ``url``; True when the request succeeded (errors are logged)."""
    from botocore.exceptions import ClientError

    bucket, key = url.removeprefix("s3://").split("/", 1)
    try:
        session.client("s3").delete_object(Bucket=bucket, Key=key)
    except ClientError as err:
        logger.error("could not delete %s: %s", url, err)
        return False
    return True
