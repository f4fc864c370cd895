"""Tests of :mod:`pt2aws.inference.selection`: ``variant="auto"``, chosen by measurement."""

import json
import shutil

import pytest
from support.compiler import NO_COMPILER
from support.cpu import OLD_X86
from support.texts import TEXTS

from pt2aws.inference import selection, variants


# ------------------------------------------------------------------ auto: choice by measurement
def _rows(**speeds_and_agreement):
    return [
        {"variant": name, "samples_per_s": sps, "agreement": agree}
        for name, (sps, agree) in speeds_and_agreement.items()
    ]


@pytest.fixture
def fixed_timings(monkeypatch):
    """Replace measured speeds and agreements by fixed ones (the choice becomes deterministic);
    the predictors are still built for real."""
    from pt2aws.inference import measure

    table = {"eager": (100.0, 1.0), "int8-legacy": (300.0, 1.0)}

    def fake_compare(predictors, texts, **kwargs):
        return [
            {"variant": n, "p50_ms": 1.0, "p90_ms": 1.0, "p99_ms": 1.0, "samples_per_s": table[n][0],
             "agreement": table[n][1]}
            for n in predictors
        ]  # fmt: skip

    monkeypatch.setattr(measure, "compare_predictors", fake_compare)
    return table


def test_measure_agreement_of_int8_on_given_texts(smoke_model_dir, eager_probs, int8_predictor):
    from pt2aws.inference.selection import measure_agreement
    from pt2aws.metrics.agreement import label_agreement

    agreement = measure_agreement(str(smoke_model_dir), TEXTS, "int8")
    by_hand = label_agreement(eager_probs.argmax(-1).tolist(), int8_predictor.predict_ids(TEXTS))
    assert agreement == by_hand
    assert 0.9 <= agreement <= 1.0


def test_compare_variants_skips_what_the_hardware_cannot_run(smoke_model_dir, monkeypatch):
    from pt2aws import env
    from pt2aws.inference.selection import compare_variants

    monkeypatch.setattr(env, "cpu_features", OLD_X86)
    result = compare_variants(
        str(smoke_model_dir), TEXTS, ["int8-legacy", "bf16"], latency_calls=2, repeats=1,
        device="cpu",
    )  # fmt: skip
    assert [r["variant"] for r in result["rows"]] == ["eager", "int8-legacy"]  # eager: reference
    assert "old x86 has no AVX512-BF16" in result["skipped"]["bf16"]
    eager, int8 = result["rows"]
    assert eager["agreement"] == 1.0 and eager["calls"] == 2
    assert 0.0 <= int8["agreement"] <= 1.0 and int8["setup_s"] > 0
    agreeing = [r for r in result["rows"] if r["agreement"] >= 0.99]
    assert result["best"] == max(agreeing, key=lambda r: r["samples_per_s"])["variant"]
    assert result["auto"]["variant"] in ("eager", "int8-legacy") and result["auto"]["reason"]


def test_fastest_agreeing_needs_the_agreement_target():
    from pt2aws.inference.selection import fastest_agreeing

    rows = [
        {"variant": "eager", "samples_per_s": 100.0, "agreement": 1.0},
        {"variant": "int8", "samples_per_s": 300.0, "agreement": 0.985},
        {"variant": "bf16", "samples_per_s": 150.0, "agreement": 0.995},
    ]
    assert fastest_agreeing(rows)["variant"] == "bf16"
    assert fastest_agreeing(rows, min_agreement=0.98)["variant"] == "int8"
    with pytest.raises(ValueError, match="no variant keeps"):
        fastest_agreeing(rows[1:2])


def test_pick_variant_keeps_eager_unless_another_agrees_and_is_faster():
    from pt2aws.inference.selection import pick_variant

    choice = pick_variant(_rows(eager=(100.0, 1.0), int8=(250.0, 0.995), bf16=(90.0, 1.0)))
    assert choice.variant == "int8" and "2.50x" in choice.reason
    # faster but changes more than 1% of the labels: not eligible
    assert pick_variant(_rows(eager=(100.0, 1.0), int8=(250.0, 0.985))).variant == "eager"
    # within the 5% margin of eager: eager (simpler, and the gain is within the noise)
    choice = pick_variant(_rows(eager=(100.0, 1.0), bf16=(104.0, 1.0)))
    assert choice.variant == "eager" and "bf16 at 1.04x" in choice.reason
    with pytest.raises(ValueError, match="eager row"):
        pick_variant(_rows(int8=(250.0, 1.0)))


def test_choose_by_measurement_picks_the_fastest_agreeing(smoke_model_dir, fixed_timings, capsys):
    from pt2aws import env
    from pt2aws.inference.selection import choose_by_measurement

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(env, "cpu_features", OLD_X86)
        choice, rows = choose_by_measurement(
            str(smoke_model_dir), TEXTS[:6], candidates=["bf16", "int8-legacy"], device="cpu"
        )
    assert choice.variant == "int8-legacy" and "3.00x" in choice.reason
    assert [r["variant"] for r in rows] == ["eager", "int8-legacy"]
    printed = capsys.readouterr().out
    assert "| int8-legacy |" in printed and "bf16: not timed" in printed
    assert "auto: int8-legacy" in printed
    fixed_timings["int8-legacy"] = (300.0, 0.98)  # now it changes 2% of the labels
    choice, _ = choose_by_measurement(
        str(smoke_model_dir), TEXTS[:6], candidates=["int8-legacy"], device="cpu", verbose=False
    )
    assert choice.variant == "eager"


def test_auto_leaves_out_a_variant_that_is_slow_for_single_requests():
    from pt2aws.inference.selection import pick_variant

    rows = [
        {"variant": "eager", "samples_per_s": 100.0, "agreement": 1.0, "p50_ms": 2.0},
        {"variant": "bf16", "samples_per_s": 400.0, "agreement": 0.998, "p50_ms": 180.0},
        {"variant": "int8", "samples_per_s": 300.0, "agreement": 0.995, "p50_ms": 3.0},
    ]
    choice = pick_variant(rows)
    assert choice.variant == "int8"  # bf16 is faster at batch 32 but 90x slower at batch 1
    rows[2]["p50_ms"] = 5.0  # 2.5x eager's latency: left out too
    assert pick_variant(rows).variant == "eager"


#: Texts of the start-up tests (issue 17: the endpoint starts on the variants that work there).
STARTUP_TEXTS = ["great phone", "worst service ever", "the battery died", "love it", "meh", "ok"]


def test_a_named_compiled_variant_is_refused_at_start_with_the_reason(no_compiler, smoke_model_dir):
    from transformers import AutoModelForSequenceClassification

    model = AutoModelForSequenceClassification.from_pretrained(smoke_model_dir).eval()
    with pytest.raises(ValueError, match="PT2AWS_VARIANT=int8: torch.compile on a CPU needs"):
        selection.serving_variant(str(smoke_model_dir), model, "int8")


def test_auto_with_int8_eligible_serves_without_a_compiler(
    no_compiler, smoke_model_dir, tmp_path, capsys
):
    """The case that took the image down: variants.json lists int8 as eligible."""
    from transformers import AutoModelForSequenceClassification

    model_dir = tmp_path / "model"
    shutil.copytree(smoke_model_dir, model_dir)
    record = {"eligible": ["int8", "int8-legacy"], "sample": STARTUP_TEXTS, "agreement": {}}
    (model_dir / "variants.json").write_text(json.dumps(record))
    model = AutoModelForSequenceClassification.from_pretrained(model_dir).eval()
    call, variant, reason = selection.serving_variant(str(model_dir), model, "auto")
    assert variant in ("eager", "int8-legacy") and reason.startswith("auto, measured at start-up")
    printed = capsys.readouterr().out
    assert f"int8: not timed ({NO_COMPILER})" in printed  # the reason is in the log
    assert call is not None


def test_auto_skips_a_candidate_that_fails_to_build(smoke_model_dir, monkeypatch, caplog):
    """Any build or first-call failure of a candidate leaves it out; eager still serves."""
    real_build = variants.build_variant

    def broken_int8_legacy(model, variant, device):
        if variant == "int8-legacy":
            raise RuntimeError("no kernel for this CPU\nlong compiler output ...")
        return real_build(model, variant, device)

    import pt2aws.inference.predictor as predictor_module

    monkeypatch.setattr(predictor_module, "build_variant", broken_int8_legacy)
    with caplog.at_level("WARNING", logger="pt2aws.inference.selection"):
        result = selection.compare_variants(
            str(smoke_model_dir), STARTUP_TEXTS, ["int8-legacy"], latency_calls=2, repeats=1,
            device="cpu",
        )  # fmt: skip
    assert [r["variant"] for r in result["rows"]] == ["eager"]
    assert result["skipped"]["int8-legacy"] == (
        "failed to build here: RuntimeError: no kernel for this CPU"
    )
    assert result["auto"]["variant"] == "eager"
    assert "variant int8-legacy left out" in caplog.text


def test_eager_failing_is_not_hidden(smoke_model_dir, monkeypatch):
    import pt2aws.inference.predictor as predictor_module

    def broken(model, variant, device):
        raise RuntimeError("eager broke")

    monkeypatch.setattr(predictor_module, "build_variant", broken)
    with pytest.raises(RuntimeError, match="eager broke"):
        selection.compare_variants(
            str(smoke_model_dir), STARTUP_TEXTS, ["int8"], repeats=1, device="cpu"
        )
