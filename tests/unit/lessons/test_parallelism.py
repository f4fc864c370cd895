"""DDP vs FSDP2 memory and tensor parallelism on 2 CPU processes (notebook 01's section 6)."""

import pytest

from pt2aws.lessons import parallelism


@pytest.fixture(scope="module")
def lesson() -> dict:
    return parallelism.run()  # one torchrun: 8 x Linear(1024, 1024) (8.4 M params), then TP


def test_fsdp_holds_half_of_what_ddp_holds_per_rank(lesson):
    ddp, fsdp = parallelism.memory_table(lesson)
    assert (ddp["parallelism"], fsdp["parallelism"]) == ("ddp", "fsdp")
    assert ddp["world_size"] == fsdp["world_size"] == 2
    params = 8 * (1024 * 1024 + 1024) * 4  # fp32 bytes
    assert ddp["parameters_bytes"] == ddp["gradients_bytes"] == params
    assert fsdp["parameters_bytes"] == fsdp["gradients_bytes"] == params // 2
    assert ddp["optimizer_state_bytes"] // params == 2  # exp_avg + exp_avg_sq (+ step scalars)
    assert abs(fsdp["total_bytes"] / ddp["total_bytes"] - 0.5) < 0.001
    # Resident memory follows: measured 181 MB (DDP: replica + gradient buckets) vs 75 MB.
    assert ddp["peak_rss_increase_bytes"] > ddp["total_bytes"]
    assert fsdp["peak_rss_increase_bytes"] < 0.75 * ddp["peak_rss_increase_bytes"]
    assert lesson["ddp"][1]["parameters_bytes"] == params  # rank 1 holds the same as rank 0


def test_tensor_parallel_splits_each_weight_and_matches_the_whole_model(lesson):
    assert len(lesson["tp"]) == 2
    for rank in lesson["tp"]:
        assert rank["up_weight_full_shape"] == [32, 16]
        assert rank["up_weight_local_shape"] == [16, 16]  # column-wise: half the output rows
        assert rank["down_weight_full_shape"] == [16, 32]
        assert rank["down_weight_local_shape"] == [16, 16]  # row-wise: half the input columns
        assert rank["output_max_abs_diff"] < 1e-5  # fp32 sums in another order only
