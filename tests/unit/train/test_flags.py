"""The performance flags: GPUs by rule, ``auto`` on CPU by measuring (issue 23), each with why."""

from __future__ import annotations

import pytest
import torch
from support.cpu import OLD_X86, fake_cpu

from pt2aws import env
from pt2aws.train import flags, loop
from pt2aws.train.flags import choose_bf16, choose_compile, choose_fused_adamw

CPU = torch.device("cpu")
NATIVE_BF16 = fake_cpu("AMD EPYC", "x86_64", {"avx2", "avx512f", "avx512_bf16"})
TINY_RUN = ["--profile", "smoke", "--max_steps", "2", "--max_train_samples", "64"]
TINY_RUN += ["--max_eval_samples", "16", "--num_threads", "1"]


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """An empty cache of measured flags for this test."""
    path = tmp_path / "pt2aws_measured.json"
    monkeypatch.setattr(flags, "cache_file", lambda: path)
    return path


@pytest.mark.parametrize(("ratio", "enabled"), [(0.64, False), (1.8, True)])
def test_bf16_auto_on_cpu_follows_the_measured_training_steps(ratio, enabled, cache, monkeypatch,
                                                              tmp_path):  # fmt: skip
    """On a CPU with native bf16, a probe that measures bf16 slower keeps fp32; faster turns
    bf16 on; the ratio is the reason."""
    monkeypatch.setattr(env, "cpu_features", NATIVE_BF16)
    timed = []

    def probe_result(arms, **kwargs):
        for arm in arms.values():  # each arm is a real training step of the run's model
            arm(0)
        timed.append((list(arms), kwargs))
        return ratio, f"3 x 2 {kwargs['what']} each, interleaved, median"

    monkeypatch.setattr(flags, "time_interleaved", probe_result)
    metrics = loop.main([*TINY_RUN, "--output_dir", str(tmp_path / "run")])
    bf16 = metrics["flags"]["bf16"]
    assert bf16["enabled"] is enabled
    assert bf16["reason"] == (
        f"measured {ratio:.2f}x fp32's speed here: 3 x 2 training steps each, interleaved, median"
    )
    assert [names for names, _ in timed] == [["for-loop", "fused"], ["fp32", "bf16"]]
    assert metrics["flags"]["fused_adamw"]["enabled"] is enabled
    # the next run with this model and shape reads the cache instead of measuring again
    again = loop.main([*TINY_RUN, "--output_dir", str(tmp_path / "again")])
    assert len(timed) == 2 and f"cached in {cache}" in again["flags"]["bf16"]["reason"]
    assert again["flags"]["bf16"]["enabled"] is enabled


def test_without_native_bf16_one_linear_layer_decides_and_no_training_step_is_timed(
    cache, monkeypatch, tmp_path
):
    """Emulated bf16 (no AVX512-BF16/AMX): the largest Linear forward and backward, timed both
    ways, at under half fp32's speed keeps fp32 without timing an emulated training step."""
    monkeypatch.setattr(env, "cpu_features", OLD_X86)
    timed = []

    def probe_result(arms, **kwargs):
        timed.append((list(arms), kwargs["what"]))
        for arm in arms.values():
            arm(0)
        return 0.08, f"1 {kwargs['what'][:-1]} each after a warm-up one, far from 1x"

    monkeypatch.setattr(flags, "time_interleaved", probe_result)
    metrics = loop.main([*TINY_RUN, "--output_dir", str(tmp_path / "run")])
    bf16 = metrics["flags"]["bf16"]
    assert timed[1:] == [(["fp32", "bf16"], "Linear calls")]  # after the AdamW probe, no step
    assert bf16["enabled"] is False and bf16["reason"].startswith("measured 0.08x fp32's speed")
    assert "the model's largest Linear, forward and backward" in bf16["reason"]
    assert bf16["reason"].endswith("no native bf16 here, so no training step was timed")
    fused = metrics["flags"]["fused_adamw"]["reason"]
    assert fused.endswith("(the optimizer step alone: a whole training step gains less)")


class Clock:
    """A fake ``time.perf_counter`` that the arms advance: arm ``name`` costs ``cost[name]``."""

    def __init__(self, cost):
        self.now, self.cost, self.calls = 0.0, cost, []

    def arms(self):
        def arm(name):
            def step(i):
                self.calls.append((name, i))
                self.now += self.cost[name]

            return step

        return {name: arm(name) for name in self.cost}


@pytest.mark.parametrize(
    ("cost", "blocks", "how"),
    [
        ({"a": 3.0, "b": 1.0}, 0, "1 step each after a warm-up one, far from 1x, so not repeated"),
        ({"a": 1.5, "b": 1.0}, 3, "3 x 2 steps each, interleaved, median"),
        ({"a": 1.02, "b": 1.0}, 6, "6 x 2 steps each, interleaved, median, re-measured: close"),
    ],
)
def test_time_interleaved_alternates_takes_medians_and_re_measures_when_close(
    cost, blocks, how, monkeypatch
):
    clock = Clock(cost)
    monkeypatch.setattr(flags.time, "perf_counter", lambda: clock.now)
    ratio, described = flags.time_interleaved(clock.arms())
    assert ratio == pytest.approx(cost["a"] / cost["b"]) and described.startswith(how)
    order = [name for name, _ in clock.calls]
    assert order[:4] == ["a", "b", "a", "b"]  # a warm-up step each, then one timed step each
    turns = [order[4 + 4 * k : 4 + 4 * k + 4] for k in range(blocks)]
    assert turns == [
        ["b", "b", "a", "a"] if k % 2 == 0 else ["a", "a", "b", "b"] for k in range(blocks)
    ]
    steps = [i for name, i in clock.calls if name == "a"]
    assert steps == [i for name, i in clock.calls if name == "b"]  # both arms on the same batches


def test_compile_on_cpu_is_not_measured_unless_the_ab_was(cache):
    unmeasured = choose_compile(CPU, "auto", key="k")
    assert unmeasured.enabled is False and 'AB_COMPILE = "on"' in unmeasured.reason
    flags.record("torch_compile", "k", 1.3, "notebook 01's A/B, +compile vs baseline")
    measured = choose_compile(CPU, "auto", key="k")
    assert measured.enabled is True and measured.reason.startswith("measured 1.30x eager's speed")
    assert choose_compile(CPU, "on").enabled is True
    assert choose_compile(torch.device("cuda"), "auto").enabled is True


def test_gpus_keep_their_rules_and_forcing_says_what_is_missing(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda: False)
    with pytest.raises(ValueError, match="--bf16 on: this GPU has no bf16"):
        choose_bf16(torch.device("cuda"), "on")
    old_gpu = choose_bf16(torch.device("cuda"), "auto")
    assert not old_gpu.enabled and "pre-Ampere" in old_gpu.reason
    assert choose_bf16(CPU, "on").enabled is True and choose_bf16(CPU, "off").reason == "requested"
    assert choose_fused_adamw(CPU, "off").enabled is False
    from pt2aws.config import TrainConfig

    with pytest.raises(ValueError, match="Ampere"):
        flags.resolve_flags(TrainConfig(tf32="on"), CPU)
    with pytest.raises(ValueError, match="torch_compile_mode"):
        TrainConfig(torch_compile_mode="fastest")
    with pytest.raises(ValueError, match="--resume"):
        TrainConfig(resume="no/such/step-000001")


def test_without_a_model_nothing_is_measured_and_eager_cpu_pads_to_the_longest(cache):
    from pt2aws.config import TrainConfig

    chosen = flags.resolve_flags(TrainConfig(profile="smoke"), CPU)
    assert chosen["bf16"].enabled is False and "not measured" in chosen["bf16"].reason
    assert chosen["fp16"].enabled is False and chosen["tf32"].enabled is False
    assert chosen["pad_to_multiple_of_8"].enabled is False  # eager CPU: less work
    compiled = flags.resolve_flags(TrainConfig(profile="smoke", torch_compile="on"), CPU)
    assert compiled["pad_to_multiple_of_8"].enabled is True  # few shapes, few recompiles
    assert not cache.exists()
