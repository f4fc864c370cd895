"""Notebooks 00 and 03's "Try next" exercises, each run as written through papermill.

Notebook 00's exercises 1-3 and notebook 03's exercises 1-3 (smoke settings where the exercise
does not name a parameter). Not run here: 00's exercise 4 (edit a price in instances.json by
hand) and 03's exercise 4 (a real AWS account, billed: the checklist cell shows what it needs).
"""

from __future__ import annotations

import json
import shutil

import papermill as pm
import pytest

from pt2aws.pipeline import notebooks_dir
from pt2aws.rundir import RunDir

pytestmark = pytest.mark.exercises  # make test-exercises (CI), not make test: about 2 minutes
X86_DLC = "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-inference:2.6.0-cpu-py312"
CUSTOM = "123456789012.dkr.ecr.us-east-1.amazonaws.com/pt2aws-serving:test"


def _run(name: str, run_dir, **params):
    declared = pm.inspect_notebook(str(notebooks_dir() / name))
    assert set(params) <= set(declared), set(params) - set(declared)
    pm.execute_notebook(
        str(notebooks_dir() / name),
        str(run_dir / f"out-{name}"),
        parameters={"RUN_DIR": str(run_dir), **params},
        kernel_name="python3",
        cwd=str(notebooks_dir()),
        progress_bar=False,
    )
    return RunDir(run_dir)


@pytest.mark.parametrize(
    ("params", "check"),
    [
        ({"SIZING_MODEL": "70B", "TRAIN_EXAMPLES": 100000}, "big"),
        ({"PROFILE": "full", "TRAIN_EXAMPLES": 1000000}, "blog"),
        ({"REGION": "eu-central-2"}, "region"),
    ],
    ids=["00-1-70B", "00-2-full", "00-3-eu-central-2"],
)
def test_notebook_00_exercise(params, check, tmp_path):
    run = _run("00_instance_setup.ipynb", tmp_path, **{"PROFILE": "smoke", **params})
    saved = json.loads(run.recommendation_json.read_text())
    rec, plan = saved["recommendation"], saved["launch_plan"]
    if check == "big":
        assert rec["class"]["class"] == "big" and "FSDP" in rec["class"]["strategy"]
        # the single-GPU (and CPU) instances drop out of the ranking
        assert not any(r["accelerators"].startswith(("1 x", "4 vCPU")) for r in rec["training"])
    elif check == "blog":
        assert rec["model"]["name"].endswith("roberta-base")
        assert "p4d.24xlarge" in {r["instance"] for r in rec["training"]}
    else:
        assert plan["region"] == "eu-central-2" and rec["region"] == "eu-central-2"
        assert "380420809688" in plan["sagemaker_endpoint"]["image_uri"]  # eu-central-2's DLCs
        assert all("eu-central-2" in r["price"] for r in rec["inference"])  # the fallback, said


@pytest.fixture
def trained_run(smoke_train_dir, tmp_path):
    shutil.copytree(smoke_train_dir, tmp_path / "train", ignore=shutil.ignore_patterns("check*"))
    return tmp_path


FAST = {"PROFILE": "smoke", "AGREEMENT_TEXTS": 0, "LOAD_TEST_REQUESTS": 5}


def test_notebook_03_exercise_1_graviton4(trained_run):
    run = _run(
        "03_deploy_sagemaker_graviton.ipynb",
        trained_run,
        INSTANCE_TYPE="ml.c8g.xlarge",
        **FAST,
    )
    record = json.loads(run.deploy_json.read_text())
    assert record["instance_type"] == "ml.c8g.xlarge" and "arm64" in record["image_uri"]
    assert record["matches_local"] is True and record["resources_left"] == 0


def test_notebook_03_exercise_1_refuses_an_x86_image_on_graviton(trained_run):
    with pytest.raises(pm.PapermillExecutionError, match="x86_64 but ml.c7g.xlarge"):
        _run("03_deploy_sagemaker_graviton.ipynb", trained_run, IMAGE_URI=X86_DLC, **FAST)


def test_notebook_03_exercise_2_own_image_with_network_isolation(trained_run):
    run = _run(
        "03_deploy_sagemaker_graviton.ipynb",
        trained_run,
        IMAGE="custom",
        IMAGE_URI=CUSTOM,
        NETWORK_ISOLATION=True,
        **FAST,
    )
    record = json.loads(run.deploy_json.read_text())
    assert record["network_isolation"] is True and record["image_uri"] == CUSTOM
    model = record["requests"]["CreateModel"]
    assert model["PrimaryContainer"]["Environment"]["PT2AWS_VARIANT"] == "auto"
    assert record["answer_source"].startswith("the project's server on this machine")
    with pytest.raises(pm.PapermillExecutionError, match="network isolation needs IMAGE='custom'"):
        _run("03_deploy_sagemaker_graviton.ipynb", trained_run, NETWORK_ISOLATION=True, **FAST)


def test_notebook_03_exercise_3_autoscaling_and_a_kept_endpoint(trained_run):
    run = _run(
        "03_deploy_sagemaker_graviton.ipynb",
        trained_run,
        AUTOSCALING=True,
        KEEP_ENDPOINT=True,
        **FAST,
    )
    record = json.loads(run.deploy_json.read_text())
    name = record["endpoint_name"]
    assert record["left"]["scalable_targets"] == [f"endpoint/{name}/variant/AllTraffic"]
    assert record["resources_left"] == 4 and record["deleted"] == []  # kept, on purpose
    assert (
        record["kept"]["cleanup_command"]
        == f"pt2aws cleanup --prefix {name} --region us-east-1 --yes"
    )
    assert record["kept"]["usd_per_hour"] == pytest.approx(0.1734)
