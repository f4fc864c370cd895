"""Texts longer than the model's limit: plain truncation (flagged) or overlapping windows."""

import importlib.util
import tarfile

import pytest

from pt2aws.serving import handler

LONG = "great phone, really great battery and a lovely screen. " * 60  # far over 48 tokens
SHORT = "awful service"


@pytest.fixture(scope="module")
def model(smoke_model_dir):
    return handler.model_fn(str(smoke_model_dir))


def test_truncation_is_the_default_and_flags_the_long_text(model):
    assert model["long_texts"] == "truncate"
    short, long = handler.predict_fn([SHORT, LONG], model)
    assert long["truncated"] is True and "windows" not in long
    assert "truncated" not in short


def test_windows_read_the_whole_text_and_say_how_many(model):
    from pt2aws.data import windows

    windowed = {**model, "long_texts": "windows", "window_overlap": model["max_length"] // 4}
    short, long = handler.predict_fn([SHORT, LONG], windowed)
    n_tokens = len(model["tokenizer"](LONG, add_special_tokens=False)["input_ids"])
    prefix, suffix = windows.special_tokens(model["tokenizer"])
    expected = len(
        windows.token_windows(
            list(range(n_tokens)),
            max_tokens=model["max_length"],
            overlap=windowed["window_overlap"],
            prefix=prefix,
            suffix=suffix,
        )
    )
    assert long["windows"] == expected > 1 and "truncated" not in long
    assert 0.5 <= long["score"] <= 1.0
    # a text that fits is classified exactly as without windows
    assert short == handler.predict_fn([SHORT, LONG], model)[0]


def test_bad_setting_names_the_variable(smoke_model_dir, monkeypatch):
    monkeypatch.setenv("PT2AWS_LONG_TEXTS", "summarize")
    with pytest.raises(ValueError, match="PT2AWS_LONG_TEXTS='summarize'"):
        handler.model_fn(str(smoke_model_dir))


def test_the_archive_ships_the_windows_module_the_handler_imports(smoke_model_dir, tmp_path):
    from pt2aws.aws import artifact

    archive = artifact.package(smoke_model_dir, tmp_path / "model.tar.gz")
    with tarfile.open(archive) as tar:
        shipped = tar.extractfile("code/pt2aws_windows.py").read()
    assert shipped == artifact.WINDOWS_PATH.read_bytes()
    spec = importlib.util.spec_from_loader("pt2aws_windows", loader=None)
    module = importlib.util.module_from_spec(spec)
    exec(compile(shipped, "pt2aws_windows.py", "exec"), module.__dict__)  # stdlib only
    assert module.combine_window_scores([[0.2, 0.8], [0.6, 0.4]]) == pytest.approx([0.4, 0.6])


def test_predictor_windows_match_the_handlers(smoke_model_dir):
    from pt2aws.inference.predictor import Predictor

    texts = [SHORT, LONG]
    truncating = Predictor(str(smoke_model_dir))
    windowed = Predictor(str(smoke_model_dir), long_texts="windows")
    model = handler.model_fn(str(smoke_model_dir))
    served = handler.predict_fn(
        texts, {**model, "long_texts": "windows", "window_overlap": model["max_length"] // 4}
    )
    probs = windowed.predict_proba(texts)
    assert [p["label"] for p in windowed.predict(texts)] == [r["label"] for r in served]
    assert float(probs[1].max()) == pytest.approx(served[1]["score"], abs=1e-5)
    # a text that fits is classified exactly as with truncation
    assert truncating.predict_proba([SHORT])[0].tolist() == pytest.approx(
        probs[0].tolist(), abs=1e-6
    )
    with pytest.raises(ValueError, match="long_texts='summarize'"):
        Predictor(str(smoke_model_dir), long_texts="summarize")


def test_the_endpoint_serves_the_variant_asked_for_or_chosen_by_measurement(
    smoke_model_dir, tmp_path, monkeypatch
):
    """PT2AWS_VARIANT: a named variant is built; auto times only what variants.json records as
    agreeing (here stubbed); without a record, eager. The AWS DLC (no pt2aws) cannot."""
    import json
    import shutil

    from pt2aws.inference import selection
    from pt2aws.inference.variants import VariantChoice, build_variant

    model_dir = tmp_path / "model"
    shutil.copytree(smoke_model_dir, model_dir)
    monkeypatch.setenv("PT2AWS_VARIANT", "int8-legacy")
    loaded = handler.model_fn(str(model_dir))
    assert loaded["variant"] == "int8-legacy"
    assert {r["label"] for r in handler.predict_fn([SHORT, LONG], loaded)} <= {
        "negative",
        "positive",
    }

    monkeypatch.setenv("PT2AWS_VARIANT", "auto")
    assert handler.model_fn(str(model_dir))["variant"] == "eager"  # no variants.json
    timed = []

    def fake_choice(model, tokenizer, texts, *, candidates, **kwargs):
        timed.append(list(candidates))
        module, call = build_variant(model, "int8-legacy", "cpu")
        choice = VariantChoice("int8-legacy", "fastest agreeing (stub)")
        return selection.Selection(choice, [], {}, module, call)

    monkeypatch.setattr(selection, "choose_by_measurement", fake_choice)
    report = {"eligible": ["int8-legacy"], "sample": [SHORT], "agreement": {"int8": 0.9}}
    (model_dir / "variants.json").write_text(json.dumps(report))
    assert handler.model_fn(str(model_dir))["variant"] == "int8-legacy"
    assert timed == [["int8-legacy"]]  # only what the archive recorded as agreeing

    monkeypatch.setenv("PT2AWS_VARIANT", "fp4")
    with pytest.raises(ValueError, match="PT2AWS_VARIANT='fp4'"):
        handler.model_fn(str(model_dir))


def test_packaging_records_each_variants_agreement_on_validation_texts(smoke_model_dir, tmp_path):
    import json
    import tarfile

    from pt2aws.aws import artifact
    from pt2aws.inference.selection import variant_report

    texts = [SHORT, LONG, "", "ok phone", "the battery died after a day"]
    report = variant_report(str(smoke_model_dir), texts, variants=("int8-legacy",), sample=2)
    assert report["texts"] == 4 and report["sample"] == [SHORT, LONG]  # empty texts left out
    assert 0.0 <= report["agreement"]["int8-legacy"] <= 1.0
    assert report["eligible"] == (
        ["int8-legacy"] if report["agreement"]["int8-legacy"] >= 0.99 else []
    )
    archive = artifact.package(smoke_model_dir, tmp_path / "m.tar.gz", variants=report)
    with tarfile.open(archive) as tar:
        assert json.loads(tar.extractfile("variants.json").read()) == report
    assert artifact.validate_archive(archive, smoke_test=False)["bytes"] > 0
