"""Tests of :mod:`pt2aws.train.checkpointing`: resume equals an uninterrupted run; atomic saves."""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from pt2aws.train import checkpointing, loop

RUN = [
    "--profile",
    "smoke",
    "--max_train_samples",
    "200",
    "--max_eval_samples",
    "41",
    "--max_steps",
    "8",
    "--per_device_train_batch_size",
    "8",
    "--logging_steps",
    "1",
    "--num_threads",
    "1",  # 2 threads were 5-10x slower on the shared, loaded 2-core test machine
    "--save_steps",
    "4",
]


def _losses(run_dir: Path) -> dict[int, float]:
    lines = (run_dir / "train_log.jsonl").read_text().splitlines()
    return {r["step"]: r["loss"] for r in map(json.loads, lines)}


def _weights(run_dir: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    return load_file(run_dir / "model" / "model.safetensors")


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory) -> Path:
    """8 steps with dropout on (so the RNG state matters), checkpoints at steps 4 and 8."""
    out = tmp_path_factory.mktemp("full") / "train"
    loop.main([*RUN, "--output_dir", str(out)])
    return out


@pytest.fixture(scope="module")
def eager_no_dropout(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("eager") / "train"
    loop.main([*RUN, "--dropout", "0", "--output_dir", str(out)])
    return out


@pytest.fixture(scope="module")
def compiled_resume(eager_no_dropout, tmp_path_factory) -> tuple[Path, dict]:
    """The eager run's step-4 checkpoint resumed with torch.compile on (the one compile test).

    Dropout is 0 because inductor draws dropout masks from its own RNG, not eager's.
    """
    out = tmp_path_factory.mktemp("compiled") / "train"
    (out / "checkpoints").mkdir(parents=True)
    shutil.copy(eager_no_dropout / "checkpoints" / "step-000004.pt", out / "checkpoints")
    metrics = loop.main(
        [*RUN, "--dropout", "0", "--output_dir", str(out), "--resume", "auto"]
        + ["--torch_compile", "on"]
    )
    return out, metrics


def test_interrupted_and_resumed_equals_uninterrupted(uninterrupted, tmp_path, monkeypatch):
    out = tmp_path / "train"
    monkeypatch.setenv("PT2AWS_FAIL_AT_STEP", "6")
    with pytest.raises(RuntimeError, match="PT2AWS_FAIL_AT_STEP=6"):
        loop.main([*RUN, "--output_dir", str(out)])
    assert [p.name for p in checkpointing.list_checkpoints(out / "checkpoints")] == [
        "step-000004.pt"
    ]
    monkeypatch.delenv("PT2AWS_FAIL_AT_STEP")

    metrics = loop.main([*RUN, "--output_dir", str(out), "--resume", "auto"])

    assert metrics["resumed_from_step"] == 4 and metrics["train_steps"] == 8
    expected, got = _losses(uninterrupted), _losses(out)
    assert sorted(got) == list(range(1, 9))
    for step in range(1, 9):  # same batches, same dropout masks: the same numbers
        assert got[step] == pytest.approx(expected[step], abs=1e-6), step
    reference = _weights(uninterrupted)
    for name, tensor in _weights(out).items():
        torch.testing.assert_close(tensor, reference[name], rtol=0, atol=1e-6, msg=name)
    expected_metrics = json.loads((uninterrupted / "metrics.json").read_text())
    assert metrics["test_loss"] == pytest.approx(expected_metrics["test_loss"], abs=1e-6)


def test_resume_refuses_a_changed_run(uninterrupted, tmp_path):
    path = checkpointing.latest_checkpoint(uninterrupted / "checkpoints")
    with pytest.raises(ValueError, match="learning_rate"):
        loop.main(
            [*RUN, "--output_dir", str(tmp_path), "--resume", str(path), "--learning_rate", "0.5"]
        )


def test_resume_with_compile_toggled_on_continues_the_same_run(eager_no_dropout, compiled_resume):
    out, metrics = compiled_resume
    assert metrics["flags"]["torch_compile"]["enabled"] is True
    assert metrics["resumed_from_step"] == 4
    expected, got = _losses(eager_no_dropout), _losses(out)
    for step in range(5, 9):  # inductor's fused kernels round differently from eager
        assert got[step] == pytest.approx(expected[step], abs=1e-4), step
    # padded to multiples of 8 up to 48 tokens: at most a handful of graphs, not one per batch
    assert 1 <= metrics["num_compiles"] <= 4


def test_compiled_model_saves_plain_weights_that_reload_with_identical_logits(compiled_resume):
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    out, metrics = compiled_resume
    model_dir = out / "model"
    weights = _weights(out)
    assert weights and not any("_orig_mod" in k or k.startswith("module.") for k in weights)
    model = AutoModelForSequenceClassification.from_pretrained(model_dir).eval()
    final = checkpointing.load_checkpoint(checkpointing.latest_checkpoint(out / "checkpoints"))
    assert final["step"] == 8
    twin = AutoModelForSequenceClassification.from_pretrained(model_dir).eval()
    twin.load_state_dict(final["model"], strict=True)  # checkpoint keys are plain too
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    batch = tokenizer(["what a great day", "this is awful"], padding=True, return_tensors="pt")
    with torch.no_grad():
        torch.testing.assert_close(model(**batch).logits, twin(**batch).logits, rtol=0, atol=0)
    assert metrics["test_num_examples"] == 41


def test_atomic_save_keeps_last_and_ignores_temp_files(tmp_path):
    (tmp_path / ".step-000009.pt.tmp").write_bytes(b"half-written")
    for step in (1, 2, 3):
        checkpointing.save_atomic(
            {"step": step}, checkpointing.checkpoint_path(tmp_path, step), keep_last=2
        )
    assert [p.name for p in checkpointing.list_checkpoints(tmp_path)] == [
        "step-000002.pt",
        "step-000003.pt",
    ]
    assert checkpointing.load_checkpoint(checkpointing.latest_checkpoint(tmp_path))["step"] == 3
    assert checkpointing.latest_checkpoint(tmp_path / "missing") is None


def test_rng_capture_restore_repeats_every_stream():
    state = checkpointing.capture_rng()
    first = (random.random(), np.random.rand(), torch.rand(3))
    checkpointing.restore_rng(state)
    second = (random.random(), np.random.rand(), torch.rand(3))
    assert first[:2] == second[:2] and torch.equal(first[2], second[2])
