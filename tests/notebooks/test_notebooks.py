"""Every notebook, headless through papermill on the smoke profile, and the notebook lint rules."""

from __future__ import annotations

import ast
import json

import nbformat
import pytest

from pt2aws.pipeline import NOTEBOOKS, notebooks_dir

NB_DIR = notebooks_dir()
ALL = sorted(p.name for p in NB_DIR.glob("*.ipynb"))


def test_the_four_notebooks_exist_in_order():
    assert ALL == list(NOTEBOOKS)


@pytest.mark.parametrize("name", ALL)
def test_notebook_lint(name):
    nb = nbformat.read(NB_DIR / name, as_version=4)
    assert nb.metadata["kernelspec"]["name"] == "python3"
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert not any(c.get("outputs") or c.get("execution_count") for c in code), (
        "committed with outputs"
    )
    tagged = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    assert len(tagged) == 1, f"{len(tagged)} cells tagged parameters"
    tree = ast.parse(tagged[0].source)
    for node in tree.body:
        assert isinstance(node, ast.Assign) and len(node.targets) == 1, (
            "parameters cell: assignments only"
        )
        ast.literal_eval(node.value)  # raises on non-literals
        assert node.targets[0].id.isupper(), "parameter names are UPPER_SNAKE"
    for cell in code:
        assert (
            "!pip" not in cell.source
            and "sys.path" not in cell.source
            and "%%writefile" not in cell.source
        )


@pytest.fixture(scope="module")
def executed(tmp_path_factory):
    """Run 00-03 in order into one run folder with the smoke profile (about a minute)."""
    import papermill as pm

    run_dir = tmp_path_factory.mktemp("run")
    common = {"PROFILE": "smoke", "RUN_DIR": str(run_dir)}
    # notebook 01: a 3-variant A/B (each a ~10 s process on 2 cores), and its SageMaker training
    # job created against the local emulator
    extra = {
        "01_finetune_multi_gpu.ipynb": {
            "AB_VARIANTS": ["baseline", "+fused", "Trainer baseline"],
            "LAUNCH_SAGEMAKER_JOB": True,
            "AWS_TARGET": "emulator",
        }
    }
    out = {}
    for name in NOTEBOOKS:
        params = {**common, **extra.get(name, {})}
        declared = pm.inspect_notebook(str(NB_DIR / name))
        assert set(params) <= set(declared), (
            f"{name} lacks parameters {set(params) - set(declared)}"
        )
        pm.execute_notebook(
            str(NB_DIR / name),
            str(run_dir / name),
            parameters=params,
            kernel_name="python3",
            cwd=str(NB_DIR),
            progress_bar=False,
        )
        out[name] = run_dir / name
    return run_dir


def test_00_writes_env_report(executed):
    report = json.loads((executed / "env.json").read_text())
    assert report["profile"] == "smoke"
    assert report["versions"]["torch"].startswith("2.13.0")


def test_01_trains_and_loss_falls(executed):
    metrics = json.loads((executed / "train" / "metrics.json").read_text())
    log = [
        json.loads(line)
        for line in (executed / "train" / "train_log.jsonl").read_text().splitlines()
    ]
    assert 0.0 <= metrics["test_accuracy"] <= 1.0
    assert log[-1]["loss"] < log[0]["loss"], "training loss did not fall"
    assert (executed / "plots" / "training.png").stat().st_size > 5_000


def test_01_ab_measures_each_variant_against_baseline_and_trainer(executed):
    import math

    ab = json.loads((executed / "ab" / "ab.json").read_text())
    assert ab["failed"] == {}
    rows = {r["variant"]: r for r in ab["rows"]}
    assert set(rows) == {"baseline", "+fused", "Trainer baseline"}  # AB_VARIANTS
    assert rows["baseline"]["vs_baseline"] == 1.0
    assert rows["baseline"]["vs_trainer"] == pytest.approx(
        rows["baseline"]["samples_per_s"] / rows["Trainer baseline"]["samples_per_s"]
    )
    for row in rows.values():
        assert row["samples_per_s"] > 0
        assert row["tokens_per_s"] is None or row["tokens_per_s"] > 0
        assert 0.0 < row["final_loss"] < 2.0 and math.isfinite(row["final_loss"])
        assert row["peak_memory_bytes"] > 50 * 2**20  # a torch process holds > 50 MB
    # the Trainer peer trains on the same batches with the same init: same loss at equal flags
    assert rows["Trainer baseline"]["final_loss"] == pytest.approx(
        rows["baseline"]["final_loss"], abs=1e-4
    )
    assert not list((executed / "ab").glob("*/*/model")), "A/B runs must not keep their models"
    assert (executed / "plots" / "ab_speed.png").stat().st_size > 5_000


def test_01_creates_the_sagemaker_training_job_on_the_emulator(executed):
    job = json.loads((executed / "train" / "sagemaker_job.json").read_text())
    assert job["target"] == "emulator" and job["status"] == "Completed"
    assert job["spec"]["image_uri"].endswith("/pytorch-training:2.10.0-gpu-py313")
    assert (job["spec"]["instance_type"], job["spec"]["instance_count"]) == ("ml.p4d.24xlarge", 1)
    assert job["spec"]["hyperparameters"]["profile"] == "smoke"
    assert job["spec"]["hyperparameters"]["output_dir"] == "/opt/ml/model"
    assert job["model_artifact_s3"].endswith(f"/{job['name']}/output/model.tar.gz")


def test_02_reports_accuracy_and_handler_agrees(executed):
    metrics = json.loads((executed / "inference" / "metrics.json").read_text())
    train = json.loads((executed / "train" / "metrics.json").read_text())
    assert 0.0 <= metrics["accuracy"] <= 1.0
    assert metrics["accuracy"] == pytest.approx(
        train["test_accuracy"], abs=1e-9
    )  # Predictor == training eval
    assert metrics["handler_agrees"] is True
    assert sum(map(sum, metrics["confusion_matrix"])) == metrics["num_examples"] == 200
    assert (executed / "plots" / "confusion_matrix.png").is_file()


def test_03_deploys_to_emulator_and_leaves_nothing(executed):
    result = json.loads((executed / "deploy" / "deploy.json").read_text())
    assert result["target"] == "emulator"
    assert result["archive_valid"] is True
    assert "pytorch-inference-arm64" in result["image_uri"]
    assert len(result["answer"]) == 2 and {a["label"] for a in result["answer"]} <= {
        "negative",
        "positive",
    }
    assert sorted(k for k, _ in result["deleted"]) == ["endpoint", "endpoint_config", "model"]
    assert result["resources_left"] == 0


def test_summary_from_executed_run(executed):
    from pt2aws.records import write_summary

    text = write_summary(executed).read_text()
    assert "## Fine-tuning (notebook 01)" in text and "## Deployment (notebook 03)" in text
    assert "## Training speed A/B (notebook 01;" in text and "| Trainer baseline |" in text
