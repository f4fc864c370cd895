"""The artifact, the image and the endpoint settings: every check runs offline, before AWS."""

import io
import json
import tarfile

import pytest

from pt2aws import catalog
from pt2aws.aws import artifact, autoscaling, hosting, images, session


@pytest.fixture(scope="module")
def archive(smoke_model_dir, tmp_path_factory):
    return artifact.package(smoke_model_dir, tmp_path_factory.mktemp("pkg") / "model.tar.gz")


# ----------------------------------------------------------------------------------- artifact


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


# ----------------------------------------------------------------------------------- image

ARM = "pytorch-inference-arm64:2.6.0-cpu-py312-ubuntu22.04-sagemaker"
IMAGE_TABLE = [
    # (region, torch, instance, expected URI)
    *[
        ("us-east-1", "2.6.0", f"ml.{family}.xlarge", f"763104351884.dkr.ecr.us-east-1.amazonaws.com/{ARM}")
        for family in ("c6g", "c6gd", "c6gn", "c7g", "c8g", "m6g", "m6gd", "m8g", "r6g", "r6gd", "r8g")
    ],
    ("us-east-1", "2.6.0", "ml.r7gd.2xlarge", f"763104351884.dkr.ecr.us-east-1.amazonaws.com/{ARM}"),
    ("eu-west-1", "2.6.0", "ml.m5.xlarge", "763104351884.dkr.ecr.eu-west-1.amazonaws.com/pytorch-inference:2.6.0-cpu-py312"),
    ("eu-west-1", "2.6.0", "ml.c6i.xlarge", "763104351884.dkr.ecr.eu-west-1.amazonaws.com/pytorch-inference:2.6.0-cpu-py312"),
    # a version the SDK does not know for Graviton: the arm64 repository from the DLC table
    ("eu-west-1", "2.5.1", "ml.c7g.xlarge", "763104351884.dkr.ecr.eu-west-1.amazonaws.com/pytorch-inference-arm64:2.5.1-cpu-py311-ubuntu22.04-sagemaker"),
    ("ap-south-2", "2.5.1", "ml.c8g.xlarge", "772153158452.dkr.ecr.ap-south-2.amazonaws.com/pytorch-inference-arm64:2.5.1-cpu-py311-ubuntu22.04-sagemaker"),
    # older versions: the -graviton repository, also forced for Graviton4 (the SDK says x86)
    ("us-west-2", "2.4.0", "ml.c8g.xlarge", "763104351884.dkr.ecr.us-west-2.amazonaws.com/pytorch-inference-graviton:2.4.0-cpu-py311-ubuntu22.04-sagemaker"),
    ("af-south-1", "2.6.0", "ml.c7g.xlarge", f"626614931356.dkr.ecr.af-south-1.amazonaws.com/{ARM}"),
]  # fmt: skip


@pytest.mark.parametrize(("region", "torch_version", "instance", "expected"), IMAGE_TABLE)
def test_inference_image_uri_table(region, torch_version, instance, expected):
    assert images.inference_image_uri(region, torch_version, instance) == expected


def test_every_graviton_family_is_in_the_table():
    families = {catalog.instance_family(i) for _, _, i, _ in IMAGE_TABLE}
    assert set(images.hosting_graviton_families()) <= families


def test_fallback_matches_the_sdk_where_the_sdk_knows(monkeypatch):
    """Drop 2.6.0 from the SDK: the DLC table must produce the URI the SDK would have."""
    from sagemaker.core import image_uris

    expected = images.inference_image_uri("eu-central-2", "2.6.0", "ml.c7g.xlarge")

    def sdk_without_26(framework, region, version=None, **kwargs):
        raise ValueError(f"Unsupported pytorch version: {version}")

    monkeypatch.setattr(image_uris, "retrieve", sdk_without_26)
    assert images.inference_image_uri("eu-central-2", "2.6.0", "ml.c7g.xlarge") == expected


def test_region_table_agrees_with_the_sdk_registries():
    from sagemaker.core import image_uris

    sdk = image_uris.config_for_framework("pytorch")["inference_graviton"]["versions"]["2.6.0"]
    common = set(sdk["registries"]) & set(images.DLC_REGISTRY_ACCOUNTS)
    assert len(common) >= 30
    assert {r: images.DLC_REGISTRY_ACCOUNTS[r] for r in common} == {
        r: sdk["registries"][r] for r in common
    }
    assert images.DLC_REGISTRY_ACCOUNTS["us-east-1"] == "763104351884"
    assert images.DLC_REGISTRY_ACCOUNTS["me-south-1"] == "217643126080"


@pytest.mark.parametrize(
    ("args", "kwargs", "message"),
    [
        (
            ("us-east-1", "2.13.0", "ml.c7g.xlarge"),
            {},
            r"torch 2\.13\.0 on ml\.c7g\.xlarge \(family c7g, arm64\); supported: 2\.0\.1.*2\.6\.0",
        ),
        (
            ("us-east-1", "2.13.0", "ml.m5.xlarge"),
            {},
            r"x86 .*family m5, x86_64\); supported: .*2\.6\.0",
        ),
        (
            ("us-east-1", "2.6.0", "ml.c7g.xlarge"),
            {"framework": "huggingface"},
            r"Hugging Face DLCs have no arm64 image.*family c7g.*arm64.*supported versions: 2\.0\.1",
        ),
        (("us-east-1", "ml.c7g.xlarge", "2.6.0"), {}, "looks like an instance type"),
        (("mars-1", "2.6.0", "ml.c7g.xlarge"), {}, "no Deep Learning Containers registry.*mars-1"),
        (("us-east-1", "2.6.0", "ml.c99g.xlarge"), {}, "not a SageMaker real-time hosting"),
        (("us-east-1", "2.6.0", "ml.c7g.3xlarge"), {}, "sizes of c7g: .*ml.c7g.4xlarge"),
    ],
)
def test_image_errors_name_family_arch_and_versions(args, kwargs, message, monkeypatch):
    import botocore.client

    def no_aws(*a, **k):  # any AWS call would fail the test
        raise AssertionError("an AWS call was made")

    monkeypatch.setattr(botocore.client.BaseClient, "_make_api_call", no_aws)
    with pytest.raises(images.ImageSelectionError, match=message):
        images.inference_image_uri(*args, **kwargs)


@pytest.mark.parametrize(
    ("image", "instance", "message"),
    [
        (
            "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-inference:2.6.0-cpu-py312",
            "ml.c8g.xlarge",
            r"is x86_64 but ml\.c8g\.xlarge \(family c8g\) is arm64",
        ),
        (
            f"763104351884.dkr.ecr.us-east-1.amazonaws.com/{ARM}",
            "ml.m5.xlarge",
            r"is arm64 but ml\.m5\.xlarge \(family m5\) is x86_64",
        ),
        (
            "763104351884.dkr.ecr.us-east-1.amazonaws.com/huggingface-pytorch-inference:2.6.0-"
            "transformers4.51.3-cpu-py312-ubuntu22.04",
            "ml.c7g.xlarge",
            "Hugging Face DLC, which has no arm64 build",
        ),
    ],
)
def test_explicit_image_mismatch_is_refused(image, instance, message):
    with pytest.raises(images.ImageSelectionError, match=message):
        images.check_image_matches_instance(image, instance)


# ----------------------------------------------------------------------------- environment


@pytest.mark.parametrize(
    ("instance", "workers", "threads", "bf16"),
    [
        ("ml.c7g.xlarge", "4", "1", True),  # Graviton3: 4 cores, bf16
        ("ml.c8g.4xlarge", "16", "1", True),  # Graviton4
        ("ml.c6g.2xlarge", "8", "1", False),  # Graviton2 has no bf16
        ("ml.m5.xlarge", "2", "2", False),  # x86: 4 vCPUs = 2 cores x 2 threads
    ],
)
def test_endpoint_environment(instance, workers, threads, bf16):
    env = hosting.endpoint_environment(instance)
    assert env["SAGEMAKER_PROGRAM"] == "inference.py"
    assert env["SAGEMAKER_MODEL_SERVER_WORKERS"] == workers
    assert env["OMP_NUM_THREADS"] == threads
    assert env["PT2AWS_MAX_BATCH"] == "64"
    assert (env.get("DNNL_DEFAULT_FPMATH_MODE") == "BF16") is bf16
    assert ("LRU_CACHE_CAPACITY" in env) is catalog.is_graviton(instance)


def test_instance_vcpus_and_bad_types():
    assert catalog.instance_vcpus("ml.c7g.medium") == 1
    assert catalog.instance_vcpus("ml.t2.medium") == 2
    assert catalog.instance_vcpus("ml.c7g.16xlarge") == 64
    assert catalog.instance_vcpus("c7g.xlarge") == 4  # the EC2 name works too
    for malformed in ("c7g", "ml.c7g", "ml.c7g.xlarge.extra", "ml..xlarge"):
        with pytest.raises(ValueError, match="ml.<family>.<size>"):
            catalog.is_graviton(malformed)
    with pytest.raises(ValueError, match="pass vcpus= explicitly"):
        catalog.instance_vcpus("ml.c7g.metal")


def test_resource_name_is_timestamped_and_valid():
    name = session.resource_name("pt2aws-smoke")
    assert name.startswith("pt2aws-smoke-20") and len(name) == len("pt2aws-smoke-") + 15
    with pytest.raises(ValueError, match="letters, digits and single hyphens"):
        session.resource_name("my_model")


def test_autoscaling_config_is_validated():
    with pytest.raises(ValueError, match="min_instances"):
        autoscaling.AutoScaling(min_instances=3, max_instances=2)
    assert autoscaling.scalable_resource_id("e") == "endpoint/e/variant/AllTraffic"
