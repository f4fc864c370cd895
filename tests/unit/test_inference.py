import os

import pytest
import torch
from support.texts import TEXTS

from pt2aws.inference.predictor import Predictor
from pt2aws.metrics import classification_metrics


def test_predictor_batches_preserve_input_order(smoke_model_dir):
    texts = [
        "a much longer text about a terrible flight that was delayed",
        "ok",
        "great phone",
        "bad",
    ] * 5
    predictor = Predictor(str(smoke_model_dir), batch_size=3)
    one_by_one = [Predictor(str(smoke_model_dir), batch_size=1).predict([t])[0] for t in texts[:4]]
    batched = predictor.predict(texts)
    assert len(batched) == 20
    assert [b["label"] for b in batched[:4]] == [o["label"] for o in one_by_one]
    probs = predictor.predict_proba(texts)
    assert probs.shape == (20, 2)
    assert probs.sum(-1).sub(1).abs().max() < 1e-5


def test_predictor_caps_max_length_at_512(smoke_model_dir):
    assert Predictor(str(smoke_model_dir)).max_length <= 512


def test_classification_metrics_by_hand():
    m = classification_metrics([0, 0, 1, 1], [0, 1, 1, 1], ["neg", "pos"])
    assert m["accuracy"] == 0.75
    assert m["confusion_matrix"] == [[1, 1], [0, 2]]
    # F1(neg) = 2*1*0.5/1.5 = 0.6667, F1(pos) = 2*(2/3)*1/(5/3) = 0.8
    assert m["f1_per_class"]["neg"] == pytest.approx(2 / 3)
    assert m["f1"] == pytest.approx((2 / 3 + 0.8) / 2)


# ----------------------------------------------------------------------- variants and runtime


@pytest.fixture(scope="module")
def int8_predictor(smoke_model_dir):
    """The torchao int8 variant (quantized, then compiled on its first call)."""
    return Predictor(str(smoke_model_dir), variant="int8")


@pytest.mark.parametrize(
    ("variant", "tol"), [("int8", 0.02), ("int8-legacy", 0.02), ("bf16", 0.03)]
)
def test_fast_variants_stay_close_to_fp32_eager(
    smoke_model_dir, eager_probs, int8_predictor, variant, tol
):
    fast = int8_predictor if variant == "int8" else Predictor(str(smoke_model_dir), variant=variant)
    assert fast.variant == variant
    probs = fast.predict_proba(TEXTS)
    assert probs.dtype == torch.float32 and probs.shape == eager_probs.shape
    diff = (probs - eager_probs).abs().max().item()
    assert diff < tol, f"{variant}: max |dp| {diff:.4f}"
    # labels agree wherever fp32's own margin exceeds the tolerance
    confident = (eager_probs.max(-1).values - 0.5).abs() > tol
    agree = probs.argmax(-1)[confident] == eager_probs.argmax(-1)[confident]
    assert bool(agree.all())


def test_int8_legacy_variant_quantizes_every_linear(smoke_model_dir):
    fast = Predictor(str(smoke_model_dir), variant="int8-legacy")
    from torch.ao.nn.quantized.dynamic import Linear as DynamicInt8Linear

    modules = list(fast.module.modules())
    assert sum(isinstance(m, DynamicInt8Linear) for m in modules) >= 2 * 6  # 2 layers x 6+
    assert not any(type(m) is torch.nn.Linear for m in modules)


def test_int8_torchao_keeps_the_classifier_in_fp32(int8_predictor):
    from torchao.quantization import Int8Tensor

    linears = {n: m for n, m in int8_predictor.module.named_modules() if type(m) is torch.nn.Linear}
    int8 = [n for n, m in linears.items() if isinstance(m.weight, Int8Tensor)]
    fp32 = [n for n, m in linears.items() if not isinstance(m.weight, Int8Tensor)]
    assert len(int8) >= 2 * 6  # every encoder Linear of the 2 layers
    assert fp32 and all(n.startswith("classifier") for n in fp32)
    assert type(int8_predictor.model).__name__ == "OptimizedModule"  # compiled: fused quant ops


def test_measure_agreement_of_int8_on_given_texts(smoke_model_dir, eager_probs, int8_predictor):
    from pt2aws.inference.selection import measure_agreement
    from pt2aws.metrics.agreement import label_agreement

    agreement = measure_agreement(str(smoke_model_dir), TEXTS, "int8")
    by_hand = label_agreement(eager_probs.argmax(-1).tolist(), int8_predictor.predict_ids(TEXTS))
    assert agreement == by_hand
    assert 0.9 <= agreement <= 1.0


@pytest.mark.slow
def test_compile_variant_matches_eager(smoke_model_dir, eager_probs):
    compiled = Predictor(str(smoke_model_dir), variant="compile", batch_size=32)
    assert type(compiled.model).__name__ == "OptimizedModule"
    probs = compiled.predict_proba(TEXTS)
    assert (probs - eager_probs).abs().max().item() < 1e-4


def test_variant_errors_are_clear(smoke_model_dir):
    with pytest.raises(ValueError, match="choose one of"):
        Predictor(str(smoke_model_dir), variant="fp8")
    with pytest.raises(ValueError, match="CPU only"):
        Predictor(str(smoke_model_dir), variant="int8", device="cuda")


@pytest.mark.parametrize(
    ("cpu", "expected"),
    [
        ({"model": "x86 AMX", "bf16": True, "amx": True, "graviton": False}, "bf16"),
        ({"model": "Graviton3", "bf16": True, "amx": False, "graviton": True}, "bf16"),
        ({"model": "Graviton2", "bf16": False, "amx": False, "graviton": True}, "eager"),
        ({"model": "old x86", "bf16": False, "amx": False, "graviton": False}, "eager"),
    ],
)
def test_supported_variants_per_cpu(monkeypatch, cpu, expected):
    """bf16 is a candidate only where the CPU computes it natively; the reason names the CPU."""
    from pt2aws import env
    from pt2aws.inference.selection import AUTO_CANDIDATES
    from pt2aws.inference.variants import supported_variants

    monkeypatch.setattr(env, "cpu_info", lambda: cpu)
    runnable, left_out = supported_variants("cpu", AUTO_CANDIDATES)
    assert ("bf16" in runnable) is (expected == "bf16")
    assert {"eager", "int8", "int8-legacy"} <= set(runnable)
    if expected == "eager":
        assert cpu["model"] in left_out["bf16"]


@pytest.mark.parametrize(
    ("machine", "bf16", "fast_math"),
    [("aarch64", True, True), ("aarch64", False, False), ("x86_64", True, False)],
)
def test_runtime_settings_fast_math_only_on_arm_with_bf16(monkeypatch, machine, bf16, fast_math):
    import platform

    from pt2aws.inference.runtime import runtime_settings

    monkeypatch.setattr(platform, "machine", lambda: machine)
    cpu = {"bf16": bf16, "graviton": machine == "aarch64"}
    settings = runtime_settings(num_processes=2, cpu=cpu)
    assert (settings["env"].get("DNNL_DEFAULT_FPMATH_MODE") == "BF16") is fast_math
    assert settings["env"]["LRU_CACHE_CAPACITY"] == "1024"
    assert settings["env"]["THP_MEM_ALLOC_ENABLE"] == "1"
    vcpus = len(os.sched_getaffinity(0))
    assert settings["threads"] == max(1, vcpus // 2)
    assert set(settings["reasons"]) >= set(settings["env"])


def test_apply_runtime_settings_keeps_preset_values(monkeypatch):
    from pt2aws.inference.runtime import apply_runtime_settings

    for name in ("LRU_CACHE_CAPACITY", "THP_MEM_ALLOC_ENABLE", "DNNL_DEFAULT_FPMATH_MODE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    threads = torch.get_num_threads()
    try:
        record = apply_runtime_settings()
        assert record["kept"] == {"OMP_NUM_THREADS": "1"}
        assert record["applied"]["LRU_CACHE_CAPACITY"] == "1024"
        assert os.environ["THP_MEM_ALLOC_ENABLE"] == "1"
        assert record["torch_threads"] == 1
    finally:
        torch.set_num_threads(threads)


def test_model_max_tokens_is_the_real_limit():
    from transformers import BertConfig, RobertaConfig

    from pt2aws.modeling import model_max_tokens

    assert model_max_tokens(RobertaConfig(max_position_embeddings=514)) == 512
    assert model_max_tokens(BertConfig(max_position_embeddings=512)) == 512
    assert model_max_tokens(BertConfig(max_position_embeddings=2048)) == 512

    class Tok:
        model_max_length = 128

    assert model_max_tokens(RobertaConfig(max_position_embeddings=514), Tok()) == 128


def test_predictor_uses_the_models_limit_and_truncates(smoke_model_dir):
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(smoke_model_dir)
    predictor = Predictor(str(smoke_model_dir))
    assert predictor.max_length == min(config.max_position_embeddings - 2, 512, 48)
    # a text far over the limit is truncated, not an index error in the position embeddings
    assert len(predictor.predict(["word " * 2000])) == 1


def test_label_agreement():
    from pt2aws.metrics.agreement import label_agreement

    assert label_agreement([0, 1, 1, 0], [0, 1, 0, 0]) == 0.75
    with pytest.raises(ValueError, match="equal length"):
        label_agreement([0, 1], [0])


def test_latency_summary_and_table_by_hand():
    from pt2aws.inference import measure as inference

    s = inference.latency_summary([0.001 * k for k in range(1, 101)])  # 1..100 ms
    assert s["p50_ms"] == pytest.approx(50.5)
    assert s["p90_ms"] == pytest.approx(90.1)
    assert s["p99_ms"] == pytest.approx(99.01)
    assert s["calls"] == 100
    with pytest.raises(ValueError):
        inference.latency_summary([])
    rows = [
        {"variant": "hf-pipeline", **s, "samples_per_s": 100.0, "agreement": 1.0},
        {"variant": "int8", **s, "samples_per_s": 250.0, "agreement": 0.995},
        {"variant": "local-endpoint", **s, "requests_per_s": 40.0},
    ]
    table = inference.format_table(rows).splitlines()
    assert table[0].startswith("| variant | p50 ms")
    assert "| int8 | 50.5 | 90.1 | 99.0 | 250.0 | 2.50 | 0.9950 |" in table
    assert "40.0 req/s" in table[-1]


def test_measure_predictor_restores_batch_size(smoke_model_dir):
    from pt2aws.inference.measure import measure_predictor

    predictor = Predictor(str(smoke_model_dir), batch_size=5)
    row = measure_predictor(predictor, ["good", "bad"] * 8, ["good", "bad"], repeats=2, warmup=1)
    assert row["variant"] == "eager" and row["calls"] == 2
    assert row["samples_per_s"] > 0 and len(row["runs_samples_per_s"]) == 2
    assert predictor.batch_size == 5


def test_compare_variants_skips_what_the_hardware_cannot_run(smoke_model_dir, monkeypatch):
    from pt2aws import env
    from pt2aws.inference.selection import compare_variants

    no_bf16 = {"model": "old x86", "bf16": False, "amx": False, "graviton": False}
    monkeypatch.setattr(env, "cpu_info", lambda: no_bf16)
    result = compare_variants(
        str(smoke_model_dir), TEXTS, ["int8-legacy", "bf16"], latency_calls=2, repeats=1,
        device="cpu",
    )  # fmt: skip
    assert [r["variant"] for r in result["rows"]] == ["eager", "int8-legacy"]  # eager: reference
    assert "old x86 has no bf16" in result["skipped"]["bf16"]
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


def test_variant_support_reasons():
    from pt2aws.inference.variants import variant_support

    assert variant_support("eager", "cpu")[0] and variant_support("int8", "cpu")[0]
    ok, why = variant_support("int8", "cuda")
    assert not ok and "CPU only" in why
    with pytest.raises(ValueError, match="choose one of"):
        variant_support("fp8", "cpu")


# ------------------------------------------------------------------ auto: choice by measurement
def _rows(**speeds_and_agreement):
    return [
        {"variant": name, "samples_per_s": sps, "agreement": agree}
        for name, (sps, agree) in speeds_and_agreement.items()
    ]


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


def test_choose_by_measurement_picks_the_fastest_agreeing(smoke_model_dir, fixed_timings, capsys):
    from pt2aws import env
    from pt2aws.inference.selection import choose_by_measurement
    from pt2aws.inference.variants import load_fp32

    model, tokenizer = load_fp32(str(smoke_model_dir))
    no_bf16 = {"model": "old x86", "bf16": False, "amx": False, "graviton": False}
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(env, "cpu_info", lambda: no_bf16)
        chosen = choose_by_measurement(
            model, tokenizer, TEXTS[:6], candidates=["bf16", "int8-legacy"], device="cpu"
        )
    assert chosen.choice.variant == "int8-legacy" and "3.00x" in chosen.choice.reason
    assert [r["variant"] for r in chosen.rows] == ["eager", "int8-legacy"]
    printed = capsys.readouterr().out
    assert "| int8-legacy |" in printed and "bf16: not timed" in printed
    assert "auto: int8-legacy" in printed
    fixed_timings["int8-legacy"] = (300.0, 0.98)  # now it changes 2% of the labels
    chosen = choose_by_measurement(
        model, tokenizer, TEXTS[:6], candidates=["int8-legacy"], device="cpu", verbose=False
    )
    assert chosen.choice.variant == "eager" and chosen.model is model  # eager: the fp32 model


def test_predictor_auto_uses_the_measured_choice(smoke_model_dir, monkeypatch):
    from pt2aws.inference import predictor as predictor_module
    from pt2aws.inference.selection import Selection
    from pt2aws.inference.variants import VariantChoice, build_variant

    calls = []

    def fake_choose(model, tokenizer, texts, *, model_dir, device):
        calls.append((model_dir, list(texts), str(device)))
        module, call = build_variant(model, "int8-legacy", device)
        return Selection(
            VariantChoice("int8-legacy", "3.00x eager's batch-32 throughput here"), [], {},
            module, call,
        )  # fmt: skip

    monkeypatch.setattr(predictor_module, "choose_by_measurement", fake_choose)
    predictor = Predictor(str(smoke_model_dir), variant="auto", auto_texts=TEXTS[:6], device="cpu")
    assert calls == [(str(smoke_model_dir), TEXTS[:6], "cpu")]
    assert predictor.variant == "int8-legacy" and "x eager" in predictor.variant_reason
    assert len(predictor.predict(TEXTS[:3])) == 3
    with pytest.raises(ValueError, match="auto_texts"):
        Predictor(str(smoke_model_dir), variant="auto")


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
