"""Tests of :mod:`pt2aws.inference.predictor`."""

import pytest
import torch
from support.long_texts import LONG, SHORT
from support.texts import TEXTS

from pt2aws.inference.predictor import Predictor
from pt2aws.serving import handler


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


def test_predictor_uses_the_models_limit_and_truncates(smoke_model_dir):
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(smoke_model_dir)
    predictor = Predictor(str(smoke_model_dir))
    assert predictor.max_length == min(config.max_position_embeddings - 2, 512, 48)
    # a text far over the limit is truncated, not an index error in the position embeddings
    assert len(predictor.predict(["word " * 2000])) == 1


def test_predictor_auto_uses_the_measured_choice(smoke_model_dir, monkeypatch):
    from pt2aws.inference import predictor as predictor_module
    from pt2aws.inference.selection import Choice
    from pt2aws.inference.variants import Classifier, build_variant

    calls = []

    def fake_choose(model, tokenizer, texts, *, model_dir, device):
        calls.append((model_dir, list(texts), str(device)))
        module, call = build_variant(model, "bf16", device)
        kept = Classifier(call, tokenizer, model.config, module=module)
        return Choice("bf16", "3.00x eager's batch-32 throughput here"), kept

    monkeypatch.setattr(predictor_module, "choose_by_measurement", fake_choose)
    predictor = Predictor(str(smoke_model_dir), variant="auto", auto_texts=TEXTS[:6], device="cpu")
    assert calls == [(str(smoke_model_dir), TEXTS[:6], "cpu")]
    assert predictor.variant == "bf16" and "x eager" in predictor.variant_reason
    assert next(predictor.module.parameters()).dtype == torch.bfloat16
    assert len(predictor.predict(TEXTS[:3])) == 3
    with pytest.raises(ValueError, match="auto_texts"):
        Predictor(str(smoke_model_dir), variant="auto")


def test_predictor_windows_are_the_handlers(smoke_model_dir):
    texts = [SHORT, LONG]
    truncating = Predictor(str(smoke_model_dir))
    windowed = Predictor(str(smoke_model_dir), long_texts="windows")
    model = handler.model_fn(str(smoke_model_dir))
    served = handler.predict_fn(texts, {**model, "long_texts": "windows"})
    probs = windowed.predict_proba(texts)
    assert [p["label"] for p in windowed.predict(texts)] == [r["label"] for r in served]
    assert round(float(probs[1].max()), 6) == served[1]["score"] and served[1]["windows"] > 1
    # a text that fits is classified exactly as with truncation
    assert truncating.predict_proba([SHORT]).tolist()[0] == pytest.approx(
        windowed.predict_proba([SHORT]).tolist()[0], abs=1e-6
    )
    with pytest.raises(ValueError, match="long_texts='summarize'"):
        Predictor(str(smoke_model_dir), long_texts="summarize")
    with pytest.raises(TypeError, match="list of texts"):
        truncating.predict("one string")
