"""Texts longer than the model's limit: plain truncation (flagged) or overlapping windows."""

import importlib.util
import tarfile

import pytest

from pt2aws.serving import inference as handler

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
