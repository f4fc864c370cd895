"""Tests of :mod:`pt2aws.lessons.training_ab.variants`."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.cpu import OLD_X86, fake_cpu

from pt2aws import env
from pt2aws.lessons.training_ab import variants as ab_variants


def test_variants_cover_each_flag_alone_and_together():
    names = [v.name for v in ab_variants.VARIANTS]
    assert names == [
        "baseline",
        "+compile",
        "+bf16",
        "+fused",
        "recipe",
        "recipe+bucketing",
        "Trainer baseline",
        "Trainer recipe",
    ]
    base = ab_variants.VARIANTS[0]
    assert (base.bf16, base.torch_compile, base.fused_adamw) == ("off", "off", "off")
    quick, _ = ab_variants.choose_variants("off", "on", trainer=False)
    assert [v.name for v in quick] == ["baseline", "+bf16", "+fused"]
    assert set(ab_variants.FLAG_OF) <= set(names)


def test_notebook_settings_take_model_length_and_lr_from_the_profile(monkeypatch):
    from pt2aws.config import get_profile

    monkeypatch.setattr("torch.cuda.is_available", lambda: False)
    # (steps, warm-up steps (at most a third of the steps), repeats, CPU budget)
    expected = {"smoke": (8, 2, 1, None), "local": (12, 4, 1, 60.0), "full": (60, 15, 3, None)}
    for name, (steps, warmup, repeats, budget) in expected.items():
        profile = get_profile(name)
        got = ab_variants.notebook_settings(name)
        assert (got.model, got.max_length, got.learning_rate) == (
            profile.model_name_or_path,
            profile.max_length,
            profile.learning_rate,
        )
        assert (got.max_steps, got.warmup_steps, got.repeats, got.budget_s) == (
            steps,
            warmup,
            repeats,
            budget,
        )
    assert ab_variants.notebook_settings("local", steps=6, repeats=2).warmup_steps == 2
    with pytest.raises(ValueError, match="profile"):
        ab_variants.notebook_settings("huge")


def test_budget_defaults_to_a_minute_for_local_on_cpu_and_none_on_a_gpu(monkeypatch):
    monkeypatch.setattr("torch.cuda.is_available", lambda: False)
    assert ab_variants.notebook_settings("local").budget_s == 60.0
    assert ab_variants.notebook_settings("local", budget_s=0).budget_s is None
    assert ab_variants.notebook_settings("smoke", budget_s=5).budget_s == 5
    with pytest.raises(ValueError, match="AB_BUDGET_S"):
        ab_variants.notebook_settings("local", budget_s=-1)
    monkeypatch.setattr("torch.cuda.is_available", lambda: True)
    assert ab_variants.notebook_settings("local").budget_s is None  # GPUs: no budget


def test_train_args_pass_every_variant_flag():
    settings = ab_variants.BenchSettings(max_steps=5, warmup_steps=2, num_threads=1)
    bucketing = next(v for v in ab_variants.VARIANTS if v.length_bucketing)
    args = settings.train_args(bucketing, Path("/x/run"))
    flags = dict(zip(args[::2], args[1::2], strict=True))
    assert flags["--output_dir"] == str(Path("/x/run"))
    assert flags["--length_bucketing"] == "true"
    assert flags["--benchmark_warmup_steps"] == "2"
    assert (flags["--bf16"], flags["--torch_compile"], flags["--fused_adamw"]) == ("on",) * 3
    assert flags["--max_train_samples"] == str(32 * 5)


@pytest.fixture
def cpu_with(monkeypatch):
    """This process on a made-up CPU (``pt2aws.env.cpu_features`` patched), no GPU."""

    def fake(cpu) -> None:
        monkeypatch.setattr(env, "cpu_features", cpu)
        monkeypatch.setattr("torch.cuda.is_available", lambda: False)

    return fake


EPYC = fake_cpu("AMD EPYC", "x86_64", {"avx2", "avx512f", "avx512_bf16"})
AVX2_CAPPED = fake_cpu(
    "AMD EPYC",
    "x86_64",
    {"avx2", "avx512f", "avx512_bf16"},
    {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2"},
)


@pytest.mark.parametrize("cpu", [OLD_X86, AVX2_CAPPED], ids=["avx2-only", "capped-to-avx2"])
def test_a_cpu_without_native_bf16_leaves_the_bf16_variants_out_and_says_why(cpu_with, cpu):
    cpu_with(cpu)
    chosen, left_out = ab_variants.choose_variants()
    assert [v.name for v in chosen] == ["baseline", "+fused", "Trainer baseline"]
    assert len(left_out) == 2  # one line per cause: compile on CPU, emulated bf16
    compile_line, bf16_line = left_out
    assert compile_line.startswith("left out +compile, recipe, recipe+bucketing, Trainer recipe")
    assert 'AB_COMPILE = "on"' in compile_line
    assert bf16_line.startswith(f"left out +bf16: {cpu().bf16_native.reason}; bf16 is emulated")
    assert bf16_line.endswith('AB_BF16 = "on" runs them') and "\n" not in bf16_line


def test_asking_brings_an_emulated_variant_back(cpu_with):
    cpu_with(OLD_X86)
    assert "+bf16" in [v.name for v in ab_variants.choose_variants(bf16_switch="on")[0]]
    both = ab_variants.choose_variants("on", "on")[0]
    assert {"+bf16", "+compile", "recipe", "Trainer recipe"} <= {v.name for v in both}
    named, left_out = ab_variants.choose_variants(only=["baseline", "+bf16"])  # by name
    assert [v.name for v in named] == ["baseline", "+bf16"] and left_out == []


def test_a_cpu_with_native_bf16_keeps_it(cpu_with):
    cpu_with(EPYC)
    chosen, left_out = ab_variants.choose_variants()
    assert [v.name for v in chosen] == ["baseline", "+bf16", "+fused", "Trainer baseline"]
    assert len(left_out) == 1 and "AB_COMPILE" in left_out[0]
    assert "+bf16" not in [v.name for v in ab_variants.choose_variants(bf16_switch="off")[0]]


def test_bad_switches_and_names_say_what_is_allowed():
    with pytest.raises(ValueError, match="AB_BF16 must be auto, on or off"):
        ab_variants.choose_variants(bf16_switch="yes")
    with pytest.raises(ValueError, match="unknown A/B variants"):
        ab_variants.choose_variants(only=["+bf17"])
