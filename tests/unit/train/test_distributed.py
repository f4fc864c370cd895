"""The loop under torchrun on CPU (gloo): DDP, gradient accumulation, restarts, 2 nodes, FSDP2.

Every run uses the tiny model with dropout 0, so one process with batch 8, one process with
4 x 2 accumulation and two processes with 2 x 2 each see the same 8 examples per step and must
log the same losses.
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from support.training import TINY

from pt2aws.processes import free_port
from pt2aws.train import loop
from pt2aws.train.distributed import epoch_batches
from pt2aws.train.launch import config_to_args

LOSS_TOL = 2e-5  # fp32 sums in another order (2 ranks, 2 micro-batches); a lost or doubled
# example shifts the loss by > 1e-3 (1 of 8 examples with a loss near 0.69).


def _losses(run_dir) -> dict[int, float]:
    lines = (Path(run_dir) / "train_log.jsonl").read_text().splitlines()
    return {r["step"]: r["loss"] for r in map(json.loads, lines)}


def _train(out, **overrides) -> dict:
    return loop.main(config_to_args(**{**TINY, **overrides}, output_dir=str(out)))


@pytest.fixture(scope="module")
def one_process_batch8(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("ref") / "train"
    _train(out, per_device_train_batch_size=8)
    return out


@pytest.fixture(scope="module")
def two_nodes_fsdp_uneven(tmp_path_factory) -> Path:
    """Two torchrun agents (1 process each) meet over c10d on 127.0.0.1 and train with FSDP2.

    203 training examples do not split evenly over 2 ranks; 41 eval examples in batches of 4
    give rank 0 six batches and rank 1 five, which FSDP must run in lockstep.
    """
    out, port = tmp_path_factory.mktemp("nodes") / "train", free_port()
    agent = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "2"]
    agent += ["--nproc_per_node", "1", "--rdzv-backend", "c10d", "--rdzv-endpoint"]
    agent += [f"127.0.0.1:{port}", "--rdzv-id", f"pt2aws-test-{port}", "--local-addr"]
    agent += ["127.0.0.1", "-m", "pt2aws.train"] + config_to_args(
        profile="smoke",
        max_train_samples=203,
        max_eval_samples=41,
        num_train_epochs=1,
        per_device_train_batch_size=16,
        per_device_eval_batch_size=4,
        parallelism="fsdp",
        num_threads=1,
        output_dir=str(out),
    )
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    agents = [
        subprocess.Popen(
            agent,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
            start_new_session=True,
        )  # fmt: skip
        for _ in range(2)
    ]
    for proc in agents:
        try:
            output, _ = proc.communicate(timeout=300)
        except subprocess.TimeoutExpired:
            for p in agents:
                os.killpg(p.pid, signal.SIGKILL)
            pytest.fail("torchrun hung for over 300 s")
        assert proc.returncode == 0, f"torchrun exited {proc.returncode}:\n{output[-3000:]}"
    return out


def test_gradient_accumulation_4x2_equals_batch_8(one_process_batch8, tmp_path):
    _train(tmp_path, per_device_train_batch_size=4, gradient_accumulation_steps=2)
    expected, got = _losses(one_process_batch8), _losses(tmp_path)
    assert sorted(got) == list(range(1, 7))
    for step, loss in expected.items():
        assert got[step] == pytest.approx(loss, abs=LOSS_TOL), step


def test_two_process_ddp_logs_the_single_process_loss(one_process_batch8, two_process_run):
    cfg, metrics, _ = two_process_run
    assert metrics["world_size"] == 2 and metrics["parallelism"] == "ddp"
    expected, got = _losses(one_process_batch8), _losses(cfg.output_dir)
    assert sorted(got) == list(range(1, 7))  # no step logged twice after the restart
    for step, loss in expected.items():  # mean over ranks, not multiplied by world size
        assert got[step] == pytest.approx(loss, abs=LOSS_TOL), step


def test_ddp_replicas_hold_identical_parameters(two_process_run):
    assert two_process_run[1]["replica_max_abs_diff"] == 0.0  # bit for bit, after the restart


def test_killed_rank_recovers_from_last_checkpoint(two_process_run):
    _, metrics, printed = two_process_run
    assert "PT2AWS_FAIL_AT_STEP=5: rank 1 fails on purpose" in printed
    assert metrics["resumed_from_step"] == 3 and metrics["train_steps"] == 6
    assert metrics["test_num_examples"] == 41


def test_two_nodes_complete_with_uneven_data(two_nodes_fsdp_uneven):
    metrics = json.loads((two_nodes_fsdp_uneven / "metrics.json").read_text())
    assert metrics["world_size"] == 2 and metrics["parallelism"] == "fsdp"
    assert metrics["train_steps"] == 7  # ceil(ceil(203 / 2) / 16) on every rank
    assert metrics["data"]["per_split"]["train"] == 203
    # each of the 41 examples counted once: no padding duplicates, none dropped
    assert metrics["eval_num_examples"] == metrics["test_num_examples"] == 41
    assert 0.3 < metrics["final_train_loss"] < 1.2
    # every rank followed rank 0's flags (measured once there)
    assert {"bf16", "fused_adamw", "torch_compile"} <= set(metrics["flags"])


def test_fsdp_model_saves_unsharded_and_reloads_strictly(two_nodes_fsdp_uneven):
    from safetensors.torch import load_file
    from transformers import AutoModelForSequenceClassification

    model_dir = two_nodes_fsdp_uneven / "model"
    state = load_file(model_dir / "model.safetensors")
    model = AutoModelForSequenceClassification.from_pretrained(model_dir)
    assert type(model).__name__ == "RobertaForSequenceClassification"
    model.load_state_dict(state, strict=True)  # full tensors, plain names
    assert not any("_orig_mod" in k or "module." in k for k in state)


@pytest.mark.parametrize("world_size", [1, 2, 3])
@pytest.mark.parametrize("bucketing", [False, True])
def test_epoch_batches_give_every_rank_the_same_steps(world_size, bucketing):
    lengths = [(7 * i) % 40 + 3 for i in range(103)]
    per_rank = [
        epoch_batches(
            lengths, 8, world_size=world_size, rank=r, seed=1, epoch=2, bucketing=bucketing
        )
        for r in range(world_size)
    ]
    expected = math.ceil(math.ceil(103 / world_size) / 8)
    assert [len(b) for b in per_rank] == [expected] * world_size
    for step in range(expected):  # same batch size on every rank at every step
        assert len({len(b[step]) for b in per_rank}) == 1
    seen = [i for b in per_rank for batch in b for i in batch]
    assert set(seen) == set(range(103))  # nothing dropped
    assert len(seen) - 103 == (-103) % world_size  # only the padding is repeated


def test_length_bucketing_cuts_padding_and_varies_by_epoch():
    gen = torch.Generator().manual_seed(0)
    lengths = torch.randint(5, 120, (2000,), generator=gen).tolist()

    def pad_fraction(batches):
        padded = sum(-(-max(lengths[i] for i in b) // 8) * 8 * len(b) for b in batches)
        return 1 - sum(lengths[i] for b in batches for i in b) / padded

    plain = epoch_batches(lengths, 32, seed=0, epoch=0)
    bucketed = epoch_batches(lengths, 32, seed=0, epoch=0, bucketing=True)
    assert pad_fraction(plain) > 0.35 and pad_fraction(bucketed) < 0.1
    assert bucketed == epoch_batches(lengths, 32, seed=0, epoch=0, bucketing=True)
    assert bucketed != epoch_batches(lengths, 32, seed=0, epoch=1, bucketing=True)


def test_cleanup_meets_at_a_barrier_before_destroying(monkeypatch):
    """Without the barrier a gloo worker could still be releasing the last gather's tensors when
    rank 1 reached interpreter shutdown (SIGABRT). After a failure ``main`` does not call it."""
    from pt2aws.train.distributed import DistInfo, compute_cleanup

    calls = []
    monkeypatch.setattr(torch.distributed, "barrier", lambda: calls.append("barrier"))
    monkeypatch.setattr(torch.distributed, "destroy_process_group", lambda: calls.append("destroy"))
    compute_cleanup(DistInfo(rank=1, world_size=2))
    assert calls == ["barrier", "destroy"]
    calls.clear()
    compute_cleanup(DistInfo())  # one process: no group to end
    assert calls == []
