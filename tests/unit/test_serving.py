"""The serving handler's contract, called the way the SageMaker PyTorch toolkit calls it."""

import json

import pytest

from pt2aws.serving import handler


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


PRED = [
    {"label": "positive", "score": 0.9},
    {"label": None, "score": None, "empty": True},
    {"label": "negative", "score": 0.6, "truncated": True},
]
PRED_CSV = (
    "label,score,empty,truncated\npositive,0.9,false,false\n,,true,false\nnegative,0.6,false,true\n"
)


def test_output_fn_json_and_csv():
    assert json.loads(handler.output_fn(PRED, "application/json")) == PRED
    assert handler.output_fn(PRED, "text/csv") == PRED_CSV
    assert json.loads(handler.output_fn(PRED, None)) == PRED
    assert handler.output_fn([], "text/csv") == "label,score,empty,truncated\n"
    with pytest.raises(handler.NotAcceptableError) as err:
        handler.output_fn(PRED, "application/xml")
    assert err.value.status_code == 406 and "text/csv" in err.value.message


@pytest.mark.parametrize(
    ("accept", "media"),
    [
        ("*/*", "application/json"),
        ("text/*", "text/csv"),
        ("application/xml, text/csv;q=0.5", "text/csv"),
        ("application/json;q=0.2, text/csv;q=0.9", "text/csv"),
        ("application/json; charset=utf-8", "application/json"),
        ("TEXT/CSV", "text/csv"),
    ],
)
def test_output_fn_negotiates_accept_and_names_the_type(accept, media):
    body, content_type = handler.output_fn(PRED, accept)
    assert content_type == media
    assert body == (PRED_CSV if media == "text/csv" else json.dumps(PRED))


def test_accept_with_q_zero_only_is_406():
    with pytest.raises(handler.NotAcceptableError):
        handler.output_fn(PRED, "text/csv;q=0, application/json;q=0")


def test_charset_parameter_is_honoured_and_unknown_charset_is_400():
    body = "café crème".encode("latin-1")
    assert handler.input_fn(body, "text/plain; charset=latin-1") == ["café crème"]
    assert handler.input_fn("café".encode(), 'text/plain; charset="UTF-8"') == ["café"]
    with pytest.raises(handler.BadRequestError) as err:
        handler.input_fn(b"x", "text/plain; charset=klingon")
    assert err.value.status_code == 400 and "klingon" in err.value.message
    with pytest.raises(handler.BadRequestError, match="UTF-8"):
        handler.input_fn(b'{"inputs": "caf\xe9"}', "application/json")


def test_csv_without_header_and_with_extra_columns():
    assert handler.input_fn(b"great phone\nawful, really awful\n", "text/csv") == [
        "great phone",
        "awful, really awful",  # an unquoted comma splits the row; its cells are re-joined
    ]
    assert handler.input_fn("inputs\r\nok\r\n", "text/csv") == ["ok"]
    assert handler.input_fn(b"", "text/csv") == []


def test_batch_limit_is_configurable(monkeypatch):
    monkeypatch.setenv("PT2AWS_MAX_BATCH", "3")
    assert handler.input_fn('["a", "b", "c"]', "application/json") == ["a", "b", "c"]
    with pytest.raises(handler.PayloadTooLargeError, match="limit is 3"):
        handler.input_fn('["a", "b", "c", "d"]', "application/json")
    monkeypatch.setenv("PT2AWS_MAX_BATCH", "zero")
    with pytest.raises(ValueError, match="PT2AWS_MAX_BATCH"):
        handler.input_fn('["a"]', "application/json")


def test_model_limit_is_512_for_roberta_and_max_positions_for_others(smoke_model_dir, model):
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(smoke_model_dir)
    # tiny RoBERTa: positions minus the 2-slot padding offset, never above 512
    assert model["max_length"] == min(config.max_position_embeddings - 2, 512)
    assert model["max_length"] <= handler.MODEL_MAX_TOKENS


def test_whitespace_only_batch_and_plain_empty_body(model):
    assert handler.predict_fn(["", " \n\t "], model) == [
        {"label": None, "score": None, "empty": True},
        {"label": None, "score": None, "empty": True},
    ]
    assert handler.input_fn(b"", "text/plain") == [""]


def test_handler_matches_predictor(smoke_model_dir, model):
    from pt2aws.inference.predictor import Predictor

    texts = ["love it", "hate it", "meh, it is fine I guess", "best day ever!!!"]
    via_handler = handler.predict_fn(
        handler.input_fn(json.dumps({"inputs": texts}), "application/json"), model
    )
    via_predictor = Predictor(str(smoke_model_dir)).predict(texts)
    assert [h["label"] for h in via_handler] == [p["label"] for p in via_predictor]
    for h, p in zip(via_handler, via_predictor):
        assert h["score"] == pytest.approx(p["score"], abs=1e-4)


def test_unreadable_csv_is_400():
    huge = "x" * 200_000  # over csv.field_size_limit(): the reader raises csv.Error
    with pytest.raises(handler.BadRequestError, match="not readable CSV"):
        handler.input_fn(f'"{huge}"\n'.encode(), "text/csv")


def test_warmup_runs_one_prediction(model, monkeypatch):
    calls = []
    monkeypatch.setattr(handler, "predict_fn", lambda data, m: calls.append(data))
    handler.model_warmup_fn("unused", model)
    assert calls == [["warm up"]]
