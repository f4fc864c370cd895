"""``train_step``: the whole optimizer step in one function, with the numbers of the code it
replaced (``micro_step`` + ``optimizer_step`` of commit b0944a5, reassembled in
:func:`_legacy_train_step`): the loop run with either must log identical losses."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import pytest
import torch

from pt2aws.lessons.compile_explained import show_source
from pt2aws.train import loop, recipe

SMOKE = [
    "--profile",
    "smoke",
    "--max_train_samples",
    "200",
    "--max_eval_samples",
    "41",
    "--max_steps",
    "6",
    "--logging_steps",
    "1",
    "--num_threads",
    "1",
    "--seed",
    "42",
]


def _legacy_train_step(prep, micro_batches, scheduler, max_grad_norm=1.0):
    """micro_step + optimizer_step of b0944a5, called as FineTune._train_step called them."""

    def micro_step(prep, batch, *, weight, last):
        sync = contextlib.nullcontext()
        if prep.parallelism == "fsdp":
            prep.module.set_requires_gradient_sync(last)
        elif prep.parallelism == "ddp" and not last:
            sync = prep.model.no_sync()
        with sync:
            with prep.autocast():
                loss = prep.model(**batch).loss
            prep.scaler.scale(loss * weight).backward()
        return loss.detach()

    group_examples = sum(len(b["labels"]) for b in micro_batches)
    losses = []
    for i, batch in enumerate(micro_batches):
        weight = len(batch["labels"]) / group_examples
        batch = {k: v.to(prep.device, non_blocking=True) for k, v in batch.items()}
        losses.append(micro_step(prep, batch, weight=weight, last=i == len(micro_batches) - 1))
    prep.scaler.unscale_(prep.optimizer)
    torch.nn.utils.clip_grad_norm_(prep.module.parameters(), max_grad_norm)
    prep.scaler.step(prep.optimizer)
    prep.scaler.update()
    scheduler.step()
    prep.optimizer.zero_grad(set_to_none=True)
    return losses


def _losses(run_dir: Path) -> list[float]:
    return [
        json.loads(line)["loss"] for line in (run_dir / "train_log.jsonl").read_text().splitlines()
    ]


@pytest.mark.parametrize(
    "flags",
    [
        [
            "--per_device_train_batch_size",
            "4",
            "--gradient_accumulation_steps",
            "2",
            "--bf16",
            "off",
        ],
        ["--per_device_train_batch_size", "8", "--bf16", "on", "--fused_adamw", "on"],
    ],
    ids=["fp32-accumulation-4x2", "bf16-fused-8"],
)
def test_train_step_logs_the_losses_of_the_code_it_replaced(flags, tmp_path, monkeypatch):
    loop.main([*SMOKE, *flags, "--output_dir", str(tmp_path / "new")])
    monkeypatch.setattr(loop, "train_step", _legacy_train_step)
    loop.main([*SMOKE, *flags, "--output_dir", str(tmp_path / "old")])
    new, old = _losses(tmp_path / "new"), _losses(tmp_path / "old")
    assert len(new) == 6 and new == old  # bit for bit: same operations in the same order


def test_the_step_is_one_function_a_learner_reads_whole():
    source = show_source(recipe.train_step)
    assert len(source.splitlines()) <= 40
    order = [
        "set_requires_gradient_sync(last)",
        "no_sync()",
        "prep.autocast()",
        ".backward()",
        "clip_grad_norm_",
        "prep.scaler.step(prep.optimizer)",
        "scheduler.step()",
        "zero_grad(",
    ]
    positions = [source.index(part) for part in order]
    assert positions == sorted(positions)
    # notebook 01 shows both functions whole: each fits a screen (prepare without its docstring)
    prepare = show_source(recipe.prepare_model_and_optimizer, docstring=False)
    assert len(prepare.splitlines()) <= 40 and '"""' not in prepare
    assert prepare.startswith("def prepare_model_and_optimizer(") and "torch.compile(" in prepare
    # bookkeeping stays outside: no meter, progress bar, logging or fault hook in the step
    for absent in ("meter.", "progress", "log", "FAIL_AT_STEP", "print("):
        assert absent not in source
