"""The training A/B on the machine at hand: what it leaves out and why, and its time budget."""

from __future__ import annotations

import sys
import types
from dataclasses import dataclass

import pytest

from pt2aws.lessons.training_ab import runner
from pt2aws.lessons.training_ab import variants as ab_variants
from pt2aws.train.progress import ProgressReporter


@dataclass(frozen=True)
class _Capability:  # pt2aws.env.cpu.Capability's interface: truthy when present, with a reason
    available: bool
    reason: str

    def __bool__(self) -> bool:
        return self.available


@pytest.fixture
def cpu_with(monkeypatch):
    """Fake ``pt2aws.env.cpu.cpu_features()`` with a given native-bf16 answer, on a CPU."""

    def fake(native: bool, reason: str) -> None:
        features = types.SimpleNamespace(bf16_native=_Capability(native, reason))
        module = types.ModuleType("pt2aws.env.cpu")
        module.cpu_features = lambda environ=None: features
        monkeypatch.setitem(sys.modules, "pt2aws.env.cpu", module)
        monkeypatch.setattr("torch.cuda.is_available", lambda: False)

    return fake


AVX2_ONLY = "AMD EPYC 7R13 has no AVX512-BF16 or AMX-BF16"


def test_a_cpu_without_native_bf16_leaves_the_bf16_variants_out_and_says_why(cpu_with):
    cpu_with(False, AVX2_ONLY)
    choice = ab_variants.choose_variants()
    assert [v.name for v in choice.variants] == ["baseline", "+fused", "Trainer baseline"]
    assert len(choice.left_out) == 2  # one line per cause: compile on CPU, emulated bf16
    compile_line, bf16_line = choice.left_out
    assert compile_line.startswith("left out +compile, recipe, recipe+bucketing, Trainer recipe")
    assert 'AB_COMPILE = "on"' in compile_line
    assert bf16_line.startswith(f"left out +bf16: {AVX2_ONLY}; bf16 is emulated")
    assert bf16_line.endswith('AB_BF16 = "on" runs them') and "\n" not in bf16_line


def test_asking_brings_an_emulated_variant_back(cpu_with):
    cpu_with(False, AVX2_ONLY)
    assert "+bf16" in [v.name for v in ab_variants.choose_variants(bf16_switch="on").variants]
    both = ab_variants.choose_variants("on", "on").variants
    assert {"+bf16", "+compile", "recipe", "Trainer recipe"} <= {v.name for v in both}
    named = ab_variants.choose_variants(only=["baseline", "+bf16"])  # asked for by name
    assert [v.name for v in named.variants] == ["baseline", "+bf16"] and named.left_out == []


def test_a_cpu_with_native_bf16_keeps_it(cpu_with):
    cpu_with(True, "AMD EPYC 9R45 has AVX512-BF16")
    choice = ab_variants.choose_variants()
    assert [v.name for v in choice.variants] == ["baseline", "+bf16", "+fused", "Trainer baseline"]
    assert len(choice.left_out) == 1 and "AB_COMPILE" in choice.left_out[0]
    assert "+bf16" not in [v.name for v in ab_variants.choose_variants(bf16_switch="off").variants]


def test_bad_switches_and_names_say_what_is_allowed():
    with pytest.raises(ValueError, match="AB_BF16 must be auto, on or off"):
        ab_variants.choose_variants(bf16_switch="yes")
    with pytest.raises(ValueError, match="unknown A/B variants"):
        ab_variants.choose_variants(only=["+bf17"])


def test_budget_defaults_to_a_minute_for_local_on_cpu(monkeypatch):
    monkeypatch.setattr("torch.cuda.is_available", lambda: False)
    assert ab_variants.notebook_settings("local").budget_s == 60.0
    assert ab_variants.notebook_settings("smoke").budget_s is None
    assert ab_variants.notebook_settings("local", budget_s=0).budget_s is None
    assert ab_variants.notebook_settings("smoke", budget_s=5).budget_s == 5
    with pytest.raises(ValueError, match="AB_BUDGET_S"):
        ab_variants.notebook_settings("local", budget_s=-1)
    monkeypatch.setattr("torch.cuda.is_available", lambda: True)
    assert ab_variants.notebook_settings("local").budget_s is None


def test_a_run_stopped_at_its_budget_reports_the_steps_it_did(capsys):
    settings = ab_variants.BenchSettings(batch_size=32, warmup_steps=4, max_steps=12)
    reporter = ProgressReporter(total=12, mode="lines")
    for step in range(1, 8):  # 7 of 12 steps done, 2 s per step after a 10 s first step
        reporter.update(step, loss=0.7, train_time_s=10.0 + 2.0 * (step - 1))
    partial = runner.read_partial_run("loading...\n" + capsys.readouterr().out, settings)
    assert partial["steps"] == 7 and partial["stopped_at_budget"] is True
    # steady state: steps 5-7 after the 4 warm-up steps, 3 x 32 samples in 6 s
    assert partial["samples_per_s"] == pytest.approx(3 * 32 / 6.0)
    assert partial["warmup_s"] == pytest.approx(16.0) and partial["final_loss"] == 0.7
    assert runner.read_partial_run("no steps yet\n", settings) is None
    # too few steps to leave the warm-up out: the rate over all steps done
    few = runner.read_partial_run(
        '@pt2aws-progress {"step": 2, "total": 12, "train_time_s": 8.0}', settings
    )
    assert few["samples_per_s"] == pytest.approx(2 * 32 / 8.0)


def test_each_run_gets_a_fair_share_of_the_budget_left(monkeypatch, tmp_path):
    shares = []

    def fake_run(variant, settings, output_dir, stream=None, time_limit_s=None):
        shares.append(time_limit_s)
        return {"samples_per_s": 10.0, "steps": 12}

    monkeypatch.setattr(runner, "run_variant", fake_run)
    chosen = ab_variants.default_variants(compile=False, trainer=False)  # 3 variants
    settings = ab_variants.BenchSettings(repeats=2, budget_s=60.0)
    result = runner.run_ab(settings, tmp_path, chosen)
    assert len(shares) == 6 and shares[0] == pytest.approx(10.0, rel=0.01)
    assert all(s <= 60.0 / (6 - i) * 1.01 for i, s in enumerate(shares))  # never more than fair
    assert shares[-1] == pytest.approx(60.0, rel=0.01)  # instant runs leave it all to the last
    assert "budget 60 s" in runner.format_table(result)


def test_a_tiny_budget_stops_each_run_and_names_the_parameter(tmp_path):
    """Real processes: 2 s for two runs cannot reach a first step (import, data, model)."""
    settings = ab_variants.notebook_settings("smoke", budget_s=2)
    chosen = [v for v in ab_variants.default_variants() if v.name in ("baseline", "+fused")]
    result = runner.run_ab(settings, tmp_path, chosen)
    assert set(result["failed"]) == {"baseline", "+fused"} and result["rows"] == []
    for error in result["failed"].values():
        assert "before its first step; raise AB_BUDGET_S" in error
    assert not list(tmp_path.glob("*/*/model"))
