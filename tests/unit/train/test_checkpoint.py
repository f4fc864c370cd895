"""Checkpoints on torch.distributed.checkpoint: resume equals an uninterrupted run; only complete
checkpoints count; the saved weights carry plain names."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

from pt2aws.train import checkpoint, flags, loop

RUN = ["--profile", "smoke", "--max_train_samples", "200", "--max_eval_samples", "41"]
RUN += ["--max_steps", "8", "--per_device_train_batch_size", "8", "--logging_steps", "1"]
RUN += ["--num_threads", "1", "--save_steps", "4"]


def _losses(run_dir: Path) -> dict[int, float]:
    lines = (run_dir / "train_log.jsonl").read_text().splitlines()
    return {r["step"]: r["loss"] for r in map(json.loads, lines)}


def _weights(run_dir: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    return load_file(run_dir / "model" / "model.safetensors")


@pytest.fixture(scope="module")
def measured_here(tmp_path_factory):
    """An empty cache of measured flags: the first run measures bf16 and fused AdamW (on this
    model and shape), the runs after it read the same choice."""
    with pytest.MonkeyPatch.context() as patch:
        cache = tmp_path_factory.mktemp("measured") / "pt2aws_measured.json"
        patch.setattr(flags, "cache_file", lambda: cache)
        yield cache


@pytest.fixture(scope="module")
def uninterrupted(measured_here, tmp_path_factory) -> Path:
    """8 steps with dropout on (so the RNG state matters), checkpoints at steps 4 and 8."""
    out = tmp_path_factory.mktemp("full") / "train"
    loop.main([*RUN, "--output_dir", str(out)])
    return out


@pytest.fixture(scope="module")
def eager_no_dropout(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("eager") / "train"
    loop.main([*RUN, "--dropout", "0", "--bf16", "off", "--output_dir", str(out)])
    return out


@pytest.fixture(scope="module")
def compiled_resume(eager_no_dropout, tmp_path_factory) -> tuple[Path, dict]:
    """The eager run's step-4 checkpoint resumed with torch.compile on (the one compile test).

    Dropout is 0 because inductor draws dropout masks from its own RNG, not eager's.
    """
    out = tmp_path_factory.mktemp("compiled") / "train"
    step4 = eager_no_dropout / "checkpoints" / "step-000004"
    shutil.copytree(step4, out / "checkpoints" / step4.name)
    metrics = loop.main(
        [*RUN, "--dropout", "0", "--bf16", "off", "--output_dir", str(out), "--resume", "auto"]
        + ["--torch_compile", "on"]
    )
    return out, metrics


def test_interrupted_and_resumed_equals_uninterrupted(uninterrupted, tmp_path, monkeypatch):
    out = tmp_path / "train"
    from support.faults import install

    install(monkeypatch)
    monkeypatch.setenv("PT2AWS_FAIL_AT_STEP", "6")
    with pytest.raises(RuntimeError, match="PT2AWS_FAIL_AT_STEP=6"):
        loop.main([*RUN, "--output_dir", str(out)])
    assert [p.name for p in checkpoint.list_checkpoints(out / "checkpoints")] == ["step-000004"]
    monkeypatch.delenv("PT2AWS_FAIL_AT_STEP")

    resumed = ["--resume", "auto", "--save_total_limit", "1"]  # a setting a resume may change
    metrics = loop.main([*RUN, "--output_dir", str(out), *resumed])
    assert [p.name for p in checkpoint.list_checkpoints(out / "checkpoints")] == ["step-000008"]

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
    bf16 = metrics["flags"]["bf16"], expected_metrics["flags"]["bf16"]  # measured, then cached
    assert bf16[0]["enabled"] == bf16[1]["enabled"] and "cached in" in bf16[0]["reason"]


def test_resume_refuses_a_changed_run(uninterrupted, tmp_path):
    path = checkpoint.list_checkpoints(uninterrupted / "checkpoints")[-1]
    with pytest.raises(ValueError, match="learning_rate: 0.001 -> 0.5"):
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


@pytest.mark.filterwarnings("ignore:torch.distributed is disabled")  # one process: intended
def test_compiled_model_saves_plain_weights_that_reload_with_identical_logits(compiled_resume):
    import torch.distributed.checkpoint as dcp
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    out, metrics = compiled_resume
    weights = _weights(out)
    assert weights and not any("_orig_mod" in k or k.startswith("module.") for k in weights)
    model = AutoModelForSequenceClassification.from_pretrained(out / "model").eval()
    final = checkpoint.list_checkpoints(out / "checkpoints")[-1]
    assert final.name == "step-000008"
    twin = AutoModelForSequenceClassification.from_pretrained(out / "model").eval()
    state = {"model": {k: torch.zeros_like(v) for k, v in twin.state_dict().items()}}
    dcp.load(state, checkpoint_id=final, no_dist=True)  # every plain key found in the checkpoint
    twin.load_state_dict(state["model"], strict=True)
    tokenizer = AutoTokenizer.from_pretrained(out / "model")
    batch = tokenizer(["what a great day", "this is awful"], padding=True, return_tensors="pt")
    with torch.no_grad():
        torch.testing.assert_close(model(**batch).logits, twin(**batch).logits, rtol=0, atol=0)
    assert metrics["test_num_examples"] == 41


def test_only_complete_checkpoints_count_and_old_ones_go(uninterrupted, tmp_path):
    folder = tmp_path / "checkpoints"
    for step in (4, 8):
        shutil.copytree(
            uninterrupted / "checkpoints" / f"step-{step:06d}", folder / f"step-{step:06d}"
        )
    (folder / "step-000012").mkdir()  # killed while saving: shards, no .metadata yet
    shutil.copy(folder / "step-000008" / checkpoint.TRAINER_STATE, folder / "step-000012")
    (folder / "notes").mkdir()
    assert [p.name for p in checkpoint.list_checkpoints(folder)] == ["step-000004", "step-000008"]
    assert checkpoint.list_checkpoints(tmp_path / "missing") == []
    kept = checkpoint.list_checkpoints(uninterrupted / "checkpoints")  # save_total_limit 2
    assert [p.name for p in kept] == ["step-000004", "step-000008"]
