import io
import tarfile

import pytest

from pt2aws import deploy


@pytest.fixture(scope="module")
def archive(smoke_model_dir, tmp_path_factory):
    return deploy.package(smoke_model_dir, tmp_path_factory.mktemp("pkg") / "model.tar.gz")


def test_package_layout_and_determinism(archive, smoke_model_dir, tmp_path):
    with tarfile.open(archive) as tar:
        names = tar.getnames()
        reqs = tar.extractfile("code/requirements.txt").read().decode()
    assert {
        "config.json",
        "model.safetensors",
        "tokenizer.json",
        "code/inference.py",
        "code/requirements.txt",
    } <= set(names)
    assert names == sorted(names)
    assert "transformers==5.24.0" in reqs
    again = deploy.package(smoke_model_dir, tmp_path / "again.tar.gz")
    assert again.read_bytes() == archive.read_bytes()


def test_validate_archive_runs_the_handler(archive):
    result = deploy.validate_archive(archive)
    assert result["bytes"] > 10_000
    assert len(result["prediction"]) == 2
    assert {p["label"] for p in result["prediction"]} <= {"negative", "positive"}


def _tar(path, members):
    with tarfile.open(path, "w:gz") as tar:
        for name, data in members.items():
            if data is None:
                info = tarfile.TarInfo(name)
                info.type, info.linkname = tarfile.SYMTYPE, "/etc/passwd"
                tar.addfile(info)
                continue
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


GOOD = {
    "config.json": b"{}",
    "model.safetensors": b"x",
    "tokenizer.json": b"{}",
    "code/inference.py": b"",
}


@pytest.mark.parametrize(
    ("members", "message"),
    [
        ({f"model/{k}": v for k, v in GOOD.items()}, "nested"),
        (
            {**{k: v for k, v in GOOD.items() if not k.startswith("code")}, "inference.py": b""},
            "move it to code/",
        ),
        ({k: v for k, v in GOOD.items() if k != "tokenizer.json"}, "no tokenizer"),
        ({k: v for k, v in GOOD.items() if k != "model.safetensors"}, "no weights"),
        ({**GOOD, "link": None}, "links are not allowed"),
        ({**GOOD, "../evil": b"x"}, r"'\.\.' path"),
    ],
)
def test_validate_archive_rejects_bad_layouts(tmp_path, members, message):
    with pytest.raises(deploy.ArchiveError, match=message):
        deploy.validate_archive(_tar(tmp_path / "bad.tar.gz", members), smoke_test=False)


@pytest.mark.parametrize(
    ("instance", "expected"),
    [
        ("ml.c7g.xlarge", "pytorch-inference-arm64:2.6.0-cpu-py312-ubuntu22.04-sagemaker"),
        ("ml.c8g.xlarge", "pytorch-inference-arm64:2.6.0-cpu-py312-ubuntu22.04-sagemaker"),
        ("ml.m5.xlarge", "pytorch-inference:2.6.0-cpu-py312"),
    ],
)
def test_inference_image_uri(instance, expected):
    uri = deploy.inference_image_uri("eu-west-1", instance)
    assert uri == f"763104351884.dkr.ecr.eu-west-1.amazonaws.com/{expected}"


def test_image_for_unknown_graviton_version_fails_before_aws():
    with pytest.raises(deploy.ImageSelectionError, match="c7g.*supported: 2.0.1"):
        deploy.inference_image_uri("us-east-1", "ml.c7g.xlarge", torch_version="2.13.0")


def test_endpoint_environment_has_graviton_settings_only_on_graviton():
    assert deploy.endpoint_environment("ml.c7g.xlarge")["DNNL_DEFAULT_FPMATH_MODE"] == "BF16"
    assert "DNNL_DEFAULT_FPMATH_MODE" not in deploy.endpoint_environment("ml.m5.xlarge")


def test_bad_instance_type_message():
    with pytest.raises(ValueError, match="ml.<family>.<size>"):
        deploy.is_graviton("c7g.xlarge")
