"""Tests of :mod:`pt2aws.lessons.training_ab`: variants, settings, medians, ratios, budget, busy
runs, table."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.cpu import OLD_X86, fake_cpu

from pt2aws import env
from pt2aws.lessons import training_ab
from pt2aws.train import flags


def test_variants_cover_each_flag_alone_and_together():
    names = [v.name for v in training_ab.VARIANTS]
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
    base = training_ab.VARIANTS[0]
    assert (base.bf16, base.torch_compile, base.fused_adamw) == ("off", "off", "off")
    quick, _ = training_ab.choose_variants("off", "on", trainer=False)
    assert [v.name for v in quick] == ["baseline", "+bf16", "+fused"]
    assert set(training_ab.FLAG_OF) <= set(names)


def test_notebook_settings_take_model_length_and_lr_from_the_profile(monkeypatch):
    from pt2aws.config import get_profile

    monkeypatch.setattr("torch.cuda.is_available", lambda: False)
    # (steps, warm-up steps (at most a third of the steps), repeats, CPU budget)
    expected = {"smoke": (8, 2, 1, None), "local": (10, 2, 1, 60.0), "full": (60, 15, 3, None)}
    for name, (steps, warmup, repeats, budget) in expected.items():
        profile = get_profile(name)
        got = training_ab.notebook_settings(name)
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
    assert training_ab.notebook_settings("local", steps=6, repeats=2).warmup_steps == 2
    with pytest.raises(ValueError, match="profile"):
        training_ab.notebook_settings("huge")


def test_budget_defaults_to_a_minute_for_local_on_cpu_and_none_on_a_gpu(monkeypatch):
    monkeypatch.setattr("torch.cuda.is_available", lambda: False)
    assert training_ab.notebook_settings("local").budget_s == 60.0
    assert training_ab.notebook_settings("local", budget_s=0).budget_s is None
    assert training_ab.notebook_settings("smoke", budget_s=5).budget_s == 5
    with pytest.raises(ValueError, match="AB_BUDGET_S"):
        training_ab.notebook_settings("local", budget_s=-1)
    monkeypatch.setattr("torch.cuda.is_available", lambda: True)
    assert training_ab.notebook_settings("local").budget_s is None  # GPUs: no budget


def test_train_args_pass_every_variant_flag():
    settings = training_ab.BenchSettings(max_steps=5, warmup_steps=2, num_threads=1)
    bucketing = next(v for v in training_ab.VARIANTS if v.length_bucketing)
    args = settings.train_args(bucketing, Path("/x/run"))
    passed = dict(zip(args[::2], args[1::2], strict=True))
    assert passed["--output_dir"] == str(Path("/x/run"))
    assert passed["--length_bucketing"] == "true"
    assert passed["--benchmark_warmup_steps"] == "2"
    assert (passed["--bf16"], passed["--torch_compile"], passed["--fused_adamw"]) == ("on",) * 3
    assert passed["--max_train_samples"] == str(32 * 5)


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
    chosen, left_out = training_ab.choose_variants()
    assert [v.name for v in chosen] == ["baseline", "+fused", "Trainer baseline"]
    assert len(left_out) == 2  # one line per cause: compile on CPU, emulated bf16
    compile_line, bf16_line = left_out
    assert compile_line.startswith("left out +compile, recipe, recipe+bucketing, Trainer recipe")
    assert 'AB_COMPILE = "on"' in compile_line
    reason = cpu().bf16_native.reason
    assert bf16_line.startswith(f"left out +bf16: no native bf16 ({reason}): bf16 is emulated")
    assert bf16_line.endswith('AB_BF16 = "on" runs them') and "\n" not in bf16_line


def test_asking_brings_an_emulated_variant_back(cpu_with):
    cpu_with(OLD_X86)
    assert "+bf16" in [v.name for v in training_ab.choose_variants(bf16_switch="on")[0]]
    both = training_ab.choose_variants("on", "on")[0]
    assert {"+bf16", "+compile", "recipe", "Trainer recipe"} <= {v.name for v in both}
    named, left_out = training_ab.choose_variants(only=["baseline", "+bf16"])  # by name
    assert [v.name for v in named] == ["baseline", "+bf16"] and left_out == []


def test_a_cpu_with_native_bf16_keeps_it(cpu_with):
    cpu_with(EPYC)
    chosen, left_out = training_ab.choose_variants()
    assert [v.name for v in chosen] == ["baseline", "+bf16", "+fused", "Trainer baseline"]
    assert len(left_out) == 1 and "AB_COMPILE" in left_out[0]
    assert "+bf16" not in [v.name for v in training_ab.choose_variants(bf16_switch="off")[0]]


def test_bad_switches_and_names_say_what_is_allowed():
    with pytest.raises(ValueError, match="AB_BF16 must be auto, on or off"):
        training_ab.choose_variants(bf16_switch="yes")
    with pytest.raises(ValueError, match="unknown A/B variants"):
        training_ab.choose_variants(only=["+bf17"])


QUICK = ["baseline", "+bf16", "+fused"]


def _run(samples_per_s, spread=1.1, other_load=0.0, **more):
    return {"samples_per_s": samples_per_s, "spread": spread, "other_load": other_load} | more


def _result(rows, cpus=2, failed=None):
    settings = vars(training_ab.BenchSettings(repeats=3))
    return {"settings": settings, "device": "cpu", "torch": "x", "cpus": cpus, "rows": rows,
            "failed": failed or {}}  # fmt: skip


def test_summary_takes_medians_and_per_repeat_ratios():
    variants = [v for v in training_ab.VARIANTS if not v.length_bucketing]
    speeds = {
        "baseline": [10.0, 12.0, 11.0],
        "+compile": [20.0, 22.0, 21.0],
        "+bf16": [9.0, 9.0, 9.0],
        "+fused": [11.0, 11.0, 11.0],
        "recipe": [30.0, 33.0, 36.0],
        "Trainer baseline": [10.0, 10.0, 10.0],
        "Trainer recipe": [24.0, 24.0, 24.0],
    }
    runs = {
        name: [_run(s, final_loss=0.5 + i, peak_memory_bytes=2**20) for i, s in enumerate(values)]
        for name, values in speeds.items()
    }
    rows = {r["variant"]: r for r in training_ab.summarize(variants, runs)}
    assert rows["baseline"]["samples_per_s"] == 11.0 and rows["recipe"]["samples_per_s"] == 33.0
    assert rows["recipe"]["vs_baseline"] == pytest.approx(3.0)  # 30/10, 33/12, 36/11
    assert rows["recipe"]["vs_trainer"] == pytest.approx(33.0 / 24.0)
    assert rows["baseline"]["vs_trainer"] == pytest.approx(1.1)
    assert rows["+bf16"]["vs_trainer"] is None and rows["baseline"]["final_loss"] == 1.5
    table = training_ab.table(_result(list(rows.values())))
    assert table.loc["recipe", "samples/s"] == 33.0 and table.loc["recipe", "vs baseline"] == 3.0
    assert table.loc["recipe", "vs Trainer"] == 1.38 and table.loc["recipe", "peak mem MiB"] == 1
    assert list(table.index) == list(rows) and "|" not in table.to_html()
    assert table.loc["+bf16", "vs Trainer"] == "" and "NaN" not in table.to_html()


def test_a_run_s_speed_is_its_batch_over_the_median_steady_step(tmp_path):
    settings = training_ab.BenchSettings(batch_size=32, warmup_steps=2, max_steps=8)
    # 2 warm-up steps of 5 s, then 1 s a step, one 4 s stall: the median ignores the stall
    times = [5, 10, 11, 12, 16, 17, 18, 19]
    records = [{"step": i + 1, "total": 8, "train_time_s": t} for i, t in enumerate(times)]
    partial = training_ab._figures(records[:6] + [{"step": 6, "total": 8}], settings, None)
    assert partial["samples_per_s"] == 32.0 and partial["spread"] == 4.0
    assert partial["steps"] == 6 and partial["warmup_s"] == 10
    assert partial["tokens_per_s"] is None and partial["peak_memory_bytes"] is None
    metrics = {"train_tokens_per_second": 300.0, "train_samples_per_second": 10.0}
    (tmp_path / "metrics.json").write_text(json.dumps(metrics | {"peak_memory_bytes": 2**20}))
    log = [{"step": i, "loss": 1.0 / i} for i in range(1, 13)]
    (tmp_path / "train_log.jsonl").write_text("\n".join(json.dumps(r) for r in log))
    done = training_ab._figures(records, settings, tmp_path)
    assert done["samples_per_s"] == 32.0 and done["tokens_per_s"] == 30 * 32.0
    assert done["peak_memory_bytes"] == 2**20 and done["num_compiles"] is None
    # final loss: mean of the last FINAL_LOSS_STEPS = 10 logged losses (steps 3..12)
    assert done["final_loss"] == pytest.approx(sum(1.0 / i for i in range(3, 13)) / 10)
    few = training_ab._figures(records[:2], settings, None)  # no step after the warm-up
    assert few["samples_per_s"] == pytest.approx(32 / 5) and few["warmup_s"] is None


def test_a_busy_run_is_named_with_its_spread_and_recorded_for_auto_with_the_note(
    tmp_path, monkeypatch
):
    """The training's ``auto`` takes the ratio the table shows (issue 30), busy or not."""
    cache = tmp_path / "m.json"
    monkeypatch.setattr(flags, "cache_file", lambda: cache)
    variants = training_ab.choose_variants(only=QUICK)[0]
    runs = {
        "baseline": [_run(10.0)],
        "+bf16": [_run(6.4)],
        "+fused": [_run(11.0, spread=2.7, other_load=1.3)],
    }
    result = _result(training_ab.summarize(variants, runs))
    text = training_ab.describe(result)
    assert "+fused: its steady step times varied 2.7x within a run" in text
    assert "load average 1.3 on 2 CPUs" in text and "+bf16:" not in text
    training_ab.record_flags(result, training_ab.BenchSettings(num_threads=1))
    (entries,) = json.loads(cache.read_text()).values()
    assert set(entries) == {"bf16", "fused_adamw"}
    assert entries["bf16"]["ratio"] == pytest.approx(0.64)
    assert entries["fused_adamw"]["ratio"] == pytest.approx(1.1)
    assert entries["bf16"]["how"] == (
        "notebook 01's A/B, +bf16 vs baseline, whole training steps, median of 1 run(s)"
    )
    assert entries["fused_adamw"]["how"].endswith(
        "median of 1 run(s) on a busy machine (the note under its table)"
    )


def test_each_run_gets_a_fair_share_of_the_training_budget_left(monkeypatch, tmp_path):
    shares = []

    def fake_run(variant, settings, output_dir, on_step=None, limit_s=None, forker=None):
        shares.append(limit_s)
        return _run(10.0, steps=12, train_s=5.0, stopped_at_budget=False)  # each trains 5 s

    monkeypatch.setattr(training_ab, "run_variant", fake_run)
    monkeypatch.setattr(training_ab, "record_flags", lambda *a: None)
    chosen = training_ab.choose_variants(only=QUICK)[0]  # 3 variants
    settings = training_ab.BenchSettings(repeats=2, budget_s=60.0)
    result = training_ab.run_ab(settings, tmp_path, chosen)
    # (60 - 5 x runs done) / runs left: what one run leaves goes to the next ones
    assert shares == pytest.approx([10.0, 11.0, 12.5, 15.0, 20.0, 35.0])
    assert "60 s of training in all" in training_ab.describe(result)


def test_a_tiny_budget_stops_the_run_after_one_step_with_what_it_measured(tmp_path, monkeypatch):
    """A real process: its share of a 0.01 s budget is spent by the first step; one bar for the
    A/B and a plain last line."""
    import io

    monkeypatch.setattr(training_ab, "record_flags", lambda *a: None)
    settings = training_ab.notebook_settings("smoke", budget_s=0.01)
    stream = io.StringIO()
    result = training_ab.run_ab(settings, tmp_path, training_ab.VARIANTS[:1], stream=stream)
    assert result["failed"] == {}
    (row,) = result["rows"]
    assert row["steps"] == 1 and result["runs"]["baseline"][0]["stopped_at_budget"]  # 1 of 8
    assert row["samples_per_s"] > 0 and row["tokens_per_s"] is None
    assert not list(tmp_path.glob("*/*/model"))  # a stopped run's folder is not kept
    lines = stream.getvalue().split("\n")
    assert lines[-2].startswith("A/B: 1 runs in ") and lines[-2].endswith(" s, 0 failed")
    assert "baseline" in stream.getvalue() and "(stopped at its budget share)" in stream.getvalue()
    assert "A/B: 100%" in stream.getvalue()  # the bar ends full
