"""``auto`` builds its candidates from the one loaded fp32 model (issue 18): no second load from
disk per candidate, the fp32 model left as it is, the losers freed, no import circle. The CPU
is a made-up one with native bf16, so bf16 is a candidate whatever machine runs the tests."""

from __future__ import annotations

import functools
import gc
import subprocess
import sys
import weakref

import pytest
import torch
from support.cpu import fake_cpu
from support.texts import TEXTS

from pt2aws import env
from pt2aws.inference import selection
from pt2aws.inference.variants import load_fp32

CANDIDATES = ("eager", "bf16")  # no compiler, no export: quick on 2 cores
BF16_CPU = fake_cpu("bf16 x86", "x86_64", {"avx2", "avx512f", "avx512_vnni", "avx512_bf16"})


@pytest.fixture(autouse=True)
def bf16_native(monkeypatch):
    monkeypatch.setattr(env, "cpu_features", BF16_CPU)


@pytest.fixture
def loads(monkeypatch):
    """Counts model loads from disk (``from_pretrained`` of the classifier)."""
    from transformers import AutoModelForSequenceClassification

    calls = []
    real = AutoModelForSequenceClassification.from_pretrained.__func__

    def counting(cls, *args, **kwargs):
        calls.append(args[0] if args else kwargs.get("pretrained_model_name_or_path"))
        return real(cls, *args, **kwargs)

    monkeypatch.setattr(
        AutoModelForSequenceClassification, "from_pretrained", classmethod(counting)
    )
    return calls


def test_candidates_are_built_from_the_loaded_model_which_stays_fp32_and_losers_are_freed(
    smoke_model_dir, loads, monkeypatch
):
    model, tokenizer = load_fp32(str(smoke_model_dir))
    before = {k: v.clone() for k, v in model.state_dict().items()}
    measured = selection.measure_variants(model, tokenizer, TEXTS[:8], CANDIDATES,
                                          latency_calls=2, repeats=1)  # fmt: skip
    assert len(loads) == 1  # load_fp32 above; no candidate loaded the model again
    assert [r["variant"] for r in measured.rows] == list(CANDIDATES)
    assert measured.built["eager"].module is model  # eager is the loaded model itself
    assert next(measured.built["bf16"].module.parameters()).dtype == torch.bfloat16
    after = model.state_dict()
    assert all(
        after[k].dtype == torch.float32 and torch.equal(after[k], v) for k, v in before.items()
    )
    loser = weakref.ref(measured.built["bf16"].module)
    measured.rows[1]["agreement"] = 0.0  # bf16 left out: auto keeps eager and frees bf16
    monkeypatch.setattr(selection, "measure_variants", lambda *args, **kwargs: measured)
    choice, kept = selection.choose_by_measurement(model, tokenizer, TEXTS[:8])
    gc.collect()
    assert choice.variant == "eager" and kept.module is model and kept.model is model
    assert loser() is None and measured.built == {}


def test_predictor_auto_loads_the_model_once(smoke_model_dir, loads, monkeypatch):
    from pt2aws.inference import predictor as predictor_module

    few = functools.partial(selection.choose_by_measurement, candidates=CANDIDATES)
    monkeypatch.setattr(predictor_module, "choose_by_measurement", few)
    quick = functools.partial(selection.measure_variants, latency_calls=3, repeats=1)
    monkeypatch.setattr(selection, "measure_variants", quick)
    predictor = predictor_module.Predictor(
        str(smoke_model_dir), variant="auto", auto_texts=TEXTS[:8]
    )
    assert len(loads) == 1
    assert predictor.variant in CANDIDATES and predictor.variant_reason
    assert len(predictor.predict(TEXTS[:3])) == 3


def test_endpoint_auto_loads_the_model_once(smoke_model_dir, loads, tmp_path, monkeypatch, capsys):
    import json
    import shutil

    from pt2aws.serving import handler

    model_dir = tmp_path / "model"
    shutil.copytree(smoke_model_dir, model_dir)
    record = {"eligible": ["bf16"], "sample": TEXTS[:8], "agreement": {}}
    (model_dir / "variants.json").write_text(json.dumps(record))
    monkeypatch.setenv("PT2AWS_VARIANT", "auto")
    monkeypatch.setattr(handler, "choose_variant", selection.serving_variant)  # as the server does
    few = functools.partial(selection.measure_variants, latency_calls=3, repeats=1)
    monkeypatch.setattr(selection, "measure_variants", few)
    loaded = handler.model_fn(str(model_dir))
    assert len(loads) == 1  # model_fn's own load; the candidates are built from it
    assert loaded["variant"] in ("eager", "bf16")
    printed = capsys.readouterr().out  # the start-up log: a line per variant, the table, why
    assert "bf16: built in" in printed and "| bf16 |" in printed
    assert f"serving variant {loaded['variant']} (auto, measured at start-up: " in printed


def test_selection_does_not_import_the_predictor():
    """predictor -> selection -> variants: no circle back."""
    code = "import sys, pt2aws.inference.selection\nprint('pt2aws.inference.predictor' in sys.modules)\n"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
