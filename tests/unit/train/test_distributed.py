"""The training loop under torchrun on CPU (gloo): DDP, gradient accumulation, restarts, 2 nodes.

Every run uses the tiny model with dropout 0, so one process with batch 8, one process with
4 x 2 accumulation and two processes with 2 x 2 each see the same 8 examples per step and must
log the same losses. The torchrun runs are module fixtures shared by several tests (each costs
25-50 s on a loaded 2-core machine).
"""

from __future__ import annotations

import json
import math
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from pt2aws.train import loop
from pt2aws.train.distributed import epoch_batches

TINY = [
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
    "1",  # 2 threads were 5-10x slower on the shared, loaded 2-core test machine
    "--dropout",
    "0",
    "--length_bucketing",
    "false",  # bucketing groups examples per global batch: 1 x 8 and 2 x 2 x 2 would differ
]


LOSS_TOL = 2e-5  # fp32 sums in another order (2 ranks, 2 micro-batches); a lost or doubled
# example shifts the loss by > 1e-3 (1 of 8 examples with a loss near 0.69).


def _losses(run_dir: Path) -> dict[int, float]:
    lines = (run_dir / "train_log.jsonl").read_text().splitlines()
    return {r["step"]: r["loss"] for r in map(json.loads, lines)}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(args: list[str], env: dict | None = None) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "torch.distributed.run", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
        start_new_session=True,  # so a hung run can be killed with all its workers
    )


def _finish(proc: subprocess.Popen, timeout: float) -> str:
    """Wait for ``proc``; on timeout kill its process group and fail with the output."""
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        pytest.fail(f"torchrun hung for over {timeout:.0f} s:\n{out[-3000:]}")
    assert proc.returncode == 0, f"torchrun exited {proc.returncode}:\n{out[-3000:]}"
    return out


@pytest.fixture(scope="module")
def one_process_batch8(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("ref") / "train"
    loop.main([*TINY, "--output_dir", str(out), "--per_device_train_batch_size", "8"])
    return out


@pytest.fixture(scope="module")
def two_process_killed_and_restarted(tmp_path_factory) -> tuple[Path, str]:
    """2 ranks x batch 2 x 2 accumulation; rank 1 dies after step 5, torchrun restarts once."""
    out = tmp_path_factory.mktemp("ddp") / "train"
    proc = _start(
        [
            "--standalone",
            "--nproc_per_node",
            "2",
            "--max-restarts",
            "1",
            "-m",
            "pt2aws.train",
            *TINY,
            "--output_dir",
            str(out),
            "--per_device_train_batch_size",
            "2",
            "--gradient_accumulation_steps",
            "2",
            "--save_steps",
            "3",
            "--resume",
            "auto",
        ],
        env={"PT2AWS_FAIL_AT_STEP": "5"},
    )
    return out, _finish(proc, timeout=300)


@pytest.fixture(scope="module")
def two_nodes_fsdp_uneven(tmp_path_factory) -> Path:
    """Two torchrun agents (1 process each) meet over c10d on 127.0.0.1 and train with FSDP2.

    203 training examples do not split evenly over 2 ranks; 41 eval examples in batches of 4
    give rank 0 six batches and rank 1 five, which FSDP must run in lockstep.
    """
    out = tmp_path_factory.mktemp("nodes") / "train"
    port = _free_port()
    agent = [
        "--nnodes",
        "2",
        "--nproc_per_node",
        "1",
        "--rdzv-backend",
        "c10d",
        "--rdzv-endpoint",
        f"127.0.0.1:{port}",
        "--rdzv-id",
        f"pt2aws-test-{port}",
        "--local-addr",
        "127.0.0.1",
        "-m",
        "pt2aws.train",
        "--profile",
        "smoke",
        "--max_train_samples",
        "203",
        "--max_eval_samples",
        "41",
        "--num_train_epochs",
        "1",
        "--per_device_train_batch_size",
        "16",
        "--per_device_eval_batch_size",
        "4",
        "--parallelism",
        "fsdp",
        "--num_threads",
        "1",
        "--output_dir",
        str(out),
    ]
    agents = [_start(agent), _start(agent)]
    for proc in agents:
        _finish(proc, timeout=300)
    return out


def test_gradient_accumulation_4x2_equals_batch_8(one_process_batch8, tmp_path):
    loop.main(
        [
            *TINY,
            "--output_dir",
            str(tmp_path),
            "--per_device_train_batch_size",
            "4",
            "--gradient_accumulation_steps",
            "2",
        ]
    )
    expected, got = _losses(one_process_batch8), _losses(tmp_path)
    assert sorted(got) == list(range(1, 7))
    for step, loss in expected.items():
        assert got[step] == pytest.approx(loss, abs=LOSS_TOL), step


def test_two_process_ddp_logs_the_single_process_loss(
    one_process_batch8, two_process_killed_and_restarted
):
    run_dir, _ = two_process_killed_and_restarted
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert metrics["world_size"] == 2 and metrics["parallelism"] == "ddp"
    expected, got = _losses(one_process_batch8), _losses(run_dir)
    assert sorted(got) == list(range(1, 7))  # no step logged twice after the restart
    for step, loss in expected.items():  # mean over ranks, not multiplied by world size
        assert got[step] == pytest.approx(loss, abs=LOSS_TOL), step


def test_ddp_replicas_hold_identical_parameters(two_process_killed_and_restarted):
    run_dir, _ = two_process_killed_and_restarted
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert metrics["replica_max_abs_diff"] == 0.0


def test_killed_rank_recovers_from_last_checkpoint(two_process_killed_and_restarted):
    run_dir, output = two_process_killed_and_restarted
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert "PT2AWS_FAIL_AT_STEP=5: rank 1 fails on purpose" in output
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


def test_cleanup_meets_at_a_barrier_before_destroying_and_skips_both_after_a_failure(
    monkeypatch,
):
    """The teardown fix: without the barrier a gloo worker could still be releasing the last
    gather's tensors when rank 1 reached interpreter shutdown (SIGABRT, "terminate called
    without an active exception"); after a failure the peers may be gone, so neither runs."""
    from pt2aws.train.distributed import DistInfo, compute_cleanup

    calls = []
    monkeypatch.setattr(torch.distributed, "barrier", lambda: calls.append("barrier"))
    monkeypatch.setattr(torch.distributed, "destroy_process_group", lambda: calls.append("destroy"))
    compute_cleanup(DistInfo(rank=1, world_size=2), succeeded=True)
    assert calls == ["barrier", "destroy"]
    calls.clear()
    compute_cleanup(DistInfo(rank=1, world_size=2), succeeded=False)
    compute_cleanup(DistInfo(), succeeded=True)  # one process: no group to end
    assert calls == []
