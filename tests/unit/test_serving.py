"""The serving handler's contract, called the way the SageMaker PyTorch toolkit calls it."""

import json

import pytest

from pt2aws.serving import inference as handler


@pytest.fixture(scope="module")
def model(smoke_model_dir):
    return handler.model_fn(str(smoke_model_dir))


@pytest.mark.parametrize(
    ("body", "content_type", "expected"),
    [
        (b'{"inputs": "great"}', "application/json", ["great"]),
        ('{"inputs": ["a", "b"]}', "application/json; charset=utf-8", ["a", "b"]),
        (b'"just a string"', "application/json", ["just a string"]),
        (b'["x", "y"]', "application/json", ["x", "y"]),
        (
            b'text\nfirst one\n"second, with comma"\n',
            "text/csv",
            ["first one", "second, with comma"],
        ),
        (b"plain words", "text/plain", ["plain words"]),
        (b'{"inputs": []}', "application/json", []),
    ],
)
def test_input_fn_accepts_documented_forms(body, content_type, expected):
    assert handler.input_fn(body, content_type) == expected


def test_unsupported_content_type_is_415_listing_accepted():
    with pytest.raises(handler.GenericInferenceToolkitError) as err:
        handler.input_fn(b"x", "application/x-npy")
    assert err.value.status_code == 415
    assert "text/csv" in str(err.value.message)


def test_bad_utf8_is_400():
    with pytest.raises(handler.BadRequestError) as err:
        handler.input_fn(b"\xff\xfe bad", "text/plain")
    assert err.value.status_code == 400 and "UTF-8" in err.value.message


@pytest.mark.parametrize("body", [b"{not json", b'{"text": "x"}', b'{"inputs": [1, 2]}'])
def test_malformed_json_is_400(body):
    with pytest.raises(handler.BadRequestError):
        handler.input_fn(body, "application/json")


def test_too_many_texts_is_413():
    body = json.dumps({"inputs": ["x"] * (handler.MAX_BATCH + 1)})
    with pytest.raises(handler.PayloadTooLargeError) as err:
        handler.input_fn(body, "application/json")
    assert err.value.status_code == 413


def test_predict_keeps_order_and_flags_empty_and_truncated(model):
    long_text = "terrible " * 400
    out = handler.predict_fn(["good", "   ", long_text, "bad"], model)
    assert len(out) == 4
    assert out[1] == {"label": None, "score": None, "empty": True}
    assert out[2]["truncated"] is True
    assert {out[0]["label"], out[3]["label"]} <= {"negative", "positive"}
    assert 0.5 <= out[0]["score"] <= 1.0
    assert handler.predict_fn([], model) == []


def test_output_fn_json_and_csv():
    pred = [{"label": "positive", "score": 0.9}, {"label": None, "score": None, "empty": True}]
    assert json.loads(handler.output_fn(pred, "application/json")) == pred
    assert handler.output_fn(pred, "text/csv") == "label,score\npositive,0.9\n,\n"
    assert json.loads(handler.output_fn(pred, None)) == pred
    with pytest.raises(handler.NotAcceptableError) as err:
        handler.output_fn(pred, "application/xml")
    assert err.value.status_code == 406


def test_handler_matches_predictor(smoke_model_dir, model):
    from pt2aws.inference import Predictor

    texts = ["love it", "hate it", "meh, it is fine I guess", "best day ever!!!"]
    via_handler = handler.predict_fn(
        handler.input_fn(json.dumps({"inputs": texts}), "application/json"), model
    )
    via_predictor = Predictor(str(smoke_model_dir)).predict(texts)
    assert [h["label"] for h in via_handler] == [p["label"] for p in via_predictor]
    for h, p in zip(via_handler, via_predictor):
        assert h["score"] == pytest.approx(p["score"], abs=1e-4)
