"""Tests of :mod:`pt2aws.lessons.training_ab.variants`."""

from __future__ import annotations

from pathlib import Path

import pytest

from pt2aws.lessons.training_ab import variants as ab_variants


def test_variants_cover_each_flag_alone_and_together():
    names = [v.name for v in ab_variants.default_variants()]
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
    base = ab_variants.default_variants()[0]
    assert (base.bf16, base.torch_compile, base.fused_adamw) == ("off", "off", "off")
    quick = ab_variants.default_variants(compile=False, trainer=False)
    assert [v.name for v in quick] == ["baseline", "+bf16", "+fused"]


def test_notebook_settings_take_model_length_and_lr_from_the_profile():
    from pt2aws.config import get_profile

    # (steps, warm-up steps (at most a third of the steps), repeats)
    expected = {"smoke": (8, 2, 1), "local": (12, 4, 1), "full": (60, 15, 3)}
    for name, (steps, warmup, repeats) in expected.items():
        profile = get_profile(name)
        got = ab_variants.notebook_settings(name)
        assert (got.model, got.max_length, got.learning_rate) == (
            profile.model_name_or_path,
            profile.max_length,
            profile.learning_rate,
        )
        assert (got.max_steps, got.warmup_steps, got.repeats) == (steps, warmup, repeats)
    assert ab_variants.notebook_settings("local", steps=6, repeats=2).warmup_steps == 2
    with pytest.raises(ValueError, match="profile"):
        ab_variants.notebook_settings("huge")


def test_train_args_pass_every_variant_flag():
    settings = ab_variants.BenchSettings(max_steps=5, warmup_steps=2, num_threads=1)
    bucketing = next(v for v in ab_variants.default_variants() if v.length_bucketing)
    args = settings.train_args(bucketing, Path("/x/run"))
    flags = dict(zip(args[::2], args[1::2]))
    assert flags["--output_dir"] == str(Path("/x/run"))
    assert flags["--length_bucketing"] == "true"
    assert flags["--benchmark_warmup_steps"] == "2"
    assert (flags["--bf16"], flags["--torch_compile"], flags["--fused_adamw"]) == ("on",) * 3
    assert flags["--max_train_samples"] == str(32 * 5)
