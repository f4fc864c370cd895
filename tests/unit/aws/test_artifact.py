"""Tests of :mod:`pt2aws.aws.artifact`: ``model.tar.gz`` built, checked offline and uploaded."""

import io
import json
import tarfile

import pytest
from support.long_texts import LONG, SHORT

from pt2aws.aws import artifact


def test_upload_is_encrypted(emulator, model_url):
    s3 = emulator.session().client("s3")
    head = s3.head_object(Bucket="sagemaker-us-east-1-123456789012", Key="t/model.tar.gz")
    assert model_url == "s3://sagemaker-us-east-1-123456789012/t/model.tar.gz"
    assert head["ServerSideEncryption"] == "AES256"
    block = s3.get_public_access_block(Bucket="sagemaker-us-east-1-123456789012")
    assert all(block["PublicAccessBlockConfiguration"].values())


@pytest.fixture(scope="module")
def archive(smoke_model_dir, tmp_path_factory):
    return artifact.package(smoke_model_dir, tmp_path_factory.mktemp("pkg") / "model.tar.gz")


def _tar(path, members):
    with tarfile.open(path, "w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            if isinstance(data, tuple):  # (type, linkname)
                info.type, info.linkname = data
                tar.addfile(info)
                continue
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


GOOD = {
    "config.json": b"{}",
    "model.safetensors": b"x",
    "tokenizer.json": b"{}",
    "code/inference.py": b"",
    "code/requirements.txt": b"transformers==5.24.0\n",
}


def _without(*names):
    return {k: v for k, v in GOOD.items() if k not in names}


def test_package_layout_pins_and_determinism(archive, smoke_model_dir, tmp_path):
    with tarfile.open(archive) as tar:
        infos = tar.getmembers()
        reqs = tar.extractfile("code/requirements.txt").read().decode()
    names = [i.name for i in infos]
    assert {
        "config.json",
        "model.safetensors",
        "tokenizer.json",
        "code/inference.py",
        "code/requirements.txt",
    } <= set(names)
    assert names == sorted(names)
    assert all(i.isfile() and i.mtime == 0 and i.uid == 0 for i in infos)
    saved_with = json.loads((smoke_model_dir / "config.json").read_text())["transformers_version"]
    assert reqs.splitlines()[0] == f"transformers=={saved_with}"
    assert "tokenizers==0.23.3" in reqs and "torch" not in reqs
    again = artifact.package(smoke_model_dir, tmp_path / "again.tar.gz")
    assert again.read_bytes() == archive.read_bytes()


def test_requirements_follow_config_not_the_installed_version(smoke_model_dir, tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"transformers_version": "4.57.6"}))
    assert artifact.requirements_for(tmp_path) == "transformers==4.57.6\n"


def test_package_dereferences_symlinks_and_refuses_broken_ones(smoke_model_dir, tmp_path):
    model = tmp_path / "model"
    model.mkdir()
    for f in smoke_model_dir.iterdir():  # a model folder made of links, like the HF cache
        (model / f.name).symlink_to(f)
    out = artifact.package(model, tmp_path / "linked.tar.gz")
    with tarfile.open(out) as tar:
        weights = tar.getmember("model.safetensors")
        assert weights.isfile()
        assert weights.size == (smoke_model_dir / "model.safetensors").stat().st_size
    (model / "dangling.json").symlink_to(tmp_path / "nowhere.json")
    with pytest.raises(artifact.ArchiveError, match="dangling.json: broken symlink"):
        artifact.package(model, tmp_path / "broken.tar.gz")


def test_package_refuses_model_without_tokenizer(smoke_model_dir, tmp_path):
    model = tmp_path / "model"
    model.mkdir()
    for name in ("config.json", "model.safetensors"):
        (model / name).write_bytes((smoke_model_dir / name).read_bytes())
    with pytest.raises(artifact.ArchiveError, match="no tokenizer.*tokenizer.save_pretrained"):
        artifact.package(model, tmp_path / "x.tar.gz")


def test_package_refuses_compiled_weights(smoke_model_dir, tmp_path):
    from safetensors.torch import load_file, save_file

    model = tmp_path / "model"
    model.mkdir()
    for f in smoke_model_dir.iterdir():
        (model / f.name).write_bytes(f.read_bytes())
    tensors = load_file(str(model / "model.safetensors"))
    save_file({f"_orig_mod.{k}": v for k, v in tensors.items()}, str(model / "model.safetensors"))
    with pytest.raises(artifact.ArchiveError, match="_orig_mod"):
        artifact.package(model, tmp_path / "x.tar.gz")


def test_validate_archive_runs_the_handler(archive):
    result = artifact.validate_archive(archive)
    assert result["bytes"] == archive.stat().st_size > 10_000
    assert result["member_count"] == len(result["members"])
    assert result["requirements"].startswith("transformers==")
    assert len(result["prediction"]) == 2
    assert {p["label"] for p in result["prediction"]} <= {"negative", "positive"}
    assert all(0.5 <= p["score"] <= 1.0 for p in result["prediction"])


@pytest.mark.parametrize(
    ("members", "message"),
    [
        (
            {f"model/{k}": v for k, v in GOOD.items()},
            r"found model/config.json, the files are nested.*tar -C model",
        ),
        ({**_without("code/inference.py"), "inference.py": b""}, "inference.py at the root"),
        (_without("code/inference.py"), "code/inference.py missing"),
        (_without("code/requirements.txt"), "code/requirements.txt missing"),
        (_without("config.json"), "config.json missing at the archive root; save the model"),
        (_without("tokenizer.json"), "no tokenizer at the root"),
        (_without("model.safetensors"), "no weights at the root"),
        ({**GOOD, "vocab.json": (tarfile.SYMTYPE, "/etc/passwd")}, "vocab.json: symlink to"),
        ({**GOOD, "copy.json": (tarfile.LNKTYPE, "config.json")}, "copy.json: hard link"),
        ({**GOOD, "../evil.py": b"x"}, r"\.\./evil\.py: '\.\.' path"),
        ({**GOOD, "/etc/cron.d/evil": b"x"}, "/etc/cron.d/evil: absolute path"),
        ({**GOOD, "dev": (tarfile.CHRTYPE, "")}, "dev: not a regular file"),
    ],
)
def test_validate_archive_rejects_bad_layouts(tmp_path, members, message):
    with pytest.raises(artifact.ArchiveError, match=message):
        artifact.validate_archive(_tar(tmp_path / "bad.tar.gz", members), smoke_test=False)


def test_validate_archive_rejects_non_tarball(tmp_path):
    bad = tmp_path / "model.tar.gz"
    bad.write_bytes(b"not a tarball")
    with pytest.raises(artifact.ArchiveError, match="not a readable .tar.gz"):
        artifact.validate_archive(bad)


def test_minimal_good_layout_passes_without_smoke_test(tmp_path):
    result = artifact.validate_archive(_tar(tmp_path / "ok.tar.gz", GOOD), smoke_test=False)
    assert result["members"] == sorted(GOOD) and result["prediction"] is None


def test_packaging_records_each_variants_agreement_on_validation_texts(
    smoke_model_dir, tmp_path, monkeypatch
):
    import json
    import tarfile

    from support.cpu import fake_cpu

    from pt2aws import env
    from pt2aws.aws import artifact
    from pt2aws.inference.selection import variant_report

    bf16_cpu = fake_cpu("bf16 x86", "x86_64", {"avx2", "avx512f", "avx512_bf16"})
    monkeypatch.setattr(env, "cpu_features", bf16_cpu)  # else bf16 is left out, unmeasured
    texts = [SHORT, LONG, "", "ok phone", "the battery died after a day"]
    report = variant_report(str(smoke_model_dir), texts, variants=("bf16",), sample=2)
    assert report["texts"] == 4 and report["sample"] == [SHORT, LONG]  # empty texts left out
    assert 0.0 <= report["agreement"]["bf16"] <= 1.0
    assert report["eligible"] == (["bf16"] if report["agreement"]["bf16"] >= 0.99 else [])
    archive = artifact.package(smoke_model_dir, tmp_path / "m.tar.gz", variants=report)
    with tarfile.open(archive) as tar:
        assert json.loads(tar.extractfile("variants.json").read()) == report
    assert artifact.validate_archive(archive, smoke_test=False)["bytes"] > 0
