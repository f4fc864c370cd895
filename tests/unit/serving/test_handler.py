"""Tests of :mod:`pt2aws.serving.handler`, called directly as the SageMaker toolkit calls it."""

from __future__ import annotations

import codecs
import json

import pytest
import torch
from support.long_texts import LONG, SHORT

from pt2aws.serving import handler


@pytest.fixture(scope="module")
def model(smoke_model_dir):
    return handler.model_fn(str(smoke_model_dir))


def test_truncation_is_the_default_and_flags_the_long_text(model):
    assert model["long_texts"] == "truncate"
    short, long = handler.predict_fn([SHORT, LONG], model)
    assert long["truncated"] is True and "windows" not in long
    assert "truncated" not in short


def test_windows_read_the_whole_text_and_say_how_many(model):
    windowed = {**model, "long_texts": "windows"}
    assert model["stride"] == model["max_length"] // 4  # PT2AWS_WINDOW_OVERLAP's default
    short, long = handler.predict_fn([SHORT, LONG], windowed)
    tok, net, size, stride = (
        model["tokenizer"],
        model["model"],
        model["max_length"],
        model["stride"],
    )
    windows = tok(LONG, truncation=True, max_length=size, stride=stride,
                  return_overflowing_tokens=True)["input_ids"]  # fmt: skip
    assert long["windows"] == len(windows) > 2 and "truncated" not in long
    # the text's probabilities: its windows' mean, weighted by their text tokens
    text_tokens = len(tok(LONG, add_special_tokens=False)["input_ids"])
    weights = [len(w) - tok.num_special_tokens_to_add() for w in windows]
    assert sum(weights) == text_tokens + stride * (len(windows) - 1)  # every token, overlaps twice
    with torch.inference_mode():
        probs = [net(input_ids=torch.tensor([w])).logits.softmax(-1)[0] for w in windows]
    mean = sum(w * p for w, p in zip(weights, probs)) / sum(weights)
    assert long["score"] == pytest.approx(float(mean.max()), abs=1e-6)
    assert long["label"] == net.config.id2label[int(mean.argmax())]
    # a text that fits is classified exactly as without windows
    assert short == handler.predict_fn([SHORT, LONG], model)[0]


def test_bad_setting_names_the_variable(smoke_model_dir, monkeypatch):
    monkeypatch.setenv("PT2AWS_LONG_TEXTS", "summarize")
    with pytest.raises(ValueError, match="PT2AWS_LONG_TEXTS='summarize'"):
        handler.model_fn(str(smoke_model_dir))


def test_the_endpoint_serves_the_variant_asked_for_or_chosen_by_measurement(
    smoke_model_dir, tmp_path, monkeypatch
):
    """PT2AWS_VARIANT: a named variant is built; auto times only what variants.json records as
    agreeing (here stubbed); without a record, eager. The AWS DLC (no pt2aws) cannot."""
    import json
    import shutil

    from support.cpu import fake_cpu

    from pt2aws import env
    from pt2aws.inference import selection
    from pt2aws.inference.variants import Classifier, build_variant

    monkeypatch.setattr(
        env, "cpu_features", fake_cpu("bf16 x86", "x86_64", {"avx512f", "avx512_bf16"})
    )
    model_dir = tmp_path / "model"
    shutil.copytree(smoke_model_dir, model_dir)
    monkeypatch.setenv("PT2AWS_VARIANT", "bf16")
    monkeypatch.setattr(handler, "choose_variant", None)  # the AWS DLC: no server sets the hook
    with pytest.raises(RuntimeError, match="PT2AWS_VARIANT=bf16 needs the pt2aws serving image"):
        handler.model_fn(str(model_dir))
    monkeypatch.setattr(handler, "choose_variant", selection.serving_variant)  # as the server does
    loaded = handler.model_fn(str(model_dir))
    assert (
        loaded["variant"] == "bf16" and next(loaded["model"].parameters()).dtype == torch.bfloat16
    )
    assert {r["label"] for r in handler.predict_fn([SHORT, LONG], loaded)} <= {
        "negative",
        "positive",
    }

    monkeypatch.setenv("PT2AWS_VARIANT", "auto")
    assert handler.model_fn(str(model_dir))["variant"] == "eager"  # no variants.json
    timed = []

    def fake_choice(model, tokenizer, texts, *, candidates, **kwargs):
        timed.append(list(candidates))
        module, call = build_variant(model, "bf16", "cpu")
        choice = selection.Choice("bf16", "fastest agreeing (stub)")
        return choice, Classifier(call, tokenizer, model.config, module=module)

    monkeypatch.setattr(selection, "choose_by_measurement", fake_choice)
    report = {"eligible": ["bf16"], "sample": [SHORT], "agreement": {"int8": 0.9}}
    (model_dir / "variants.json").write_text(json.dumps(report))
    assert handler.model_fn(str(model_dir))["variant"] == "bf16"
    assert timed == [["bf16"]]  # only what the archive recorded as agreeing

    monkeypatch.setenv("PT2AWS_VARIANT", "fp4")
    with pytest.raises(ValueError, match="PT2AWS_VARIANT='fp4'"):
        handler.model_fn(str(model_dir))


PRED = [
    {"label": "positive", "score": 0.9},
    {"label": None, "score": None, "empty": True},
    {"label": "negative", "score": 0.6, "truncated": True},
]


PRED_CSV = (
    "label,score,empty,truncated\npositive,0.9,false,false\n,,true,false\nnegative,0.6,false,true\n"
)


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
    from sagemaker_inference.errors import BaseInferenceToolkitError

    with pytest.raises(BaseInferenceToolkitError) as err:  # what the AWS toolkit answers as 4xx
        handler.input_fn(b"x", "application/x-npy")
    assert err.value.status_code == 415 and err.value.phrase == "Unsupported Media Type"
    assert "text/csv" in str(err.value.message)


def test_bad_utf8_is_400():
    with pytest.raises(handler.ClientError) as err:
        handler.input_fn(b"\xff\xfe bad", "text/plain")
    assert err.value.status_code == 400 and "UTF-8" in err.value.message


@pytest.mark.parametrize("body", [b"{not json", b'{"text": "x"}', b'{"inputs": [1, 2]}'])
def test_malformed_json_is_400(body):
    with pytest.raises(handler.ClientError) as err:
        handler.input_fn(body, "application/json")
    assert err.value.status_code == 400


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
    assert json.loads(handler.output_fn(PRED, "application/json")) == PRED
    assert handler.output_fn(PRED, "text/csv") == PRED_CSV
    assert json.loads(handler.output_fn(PRED, None)) == PRED
    assert handler.output_fn([], "text/csv") == "label,score,empty,truncated\n"
    with pytest.raises(handler.ClientError) as err:
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
    with pytest.raises(handler.ClientError) as err:
        handler.output_fn(PRED, "text/csv;q=0, application/json;q=0")
    assert err.value.status_code == 406


def test_charset_parameter_is_honoured_and_unknown_charset_is_400():
    body = "café crème".encode("latin-1")
    assert handler.input_fn(body, "text/plain; charset=latin-1") == ["café crème"]
    assert handler.input_fn("café".encode(), 'text/plain; charset="UTF-8"') == ["café"]
    with pytest.raises(handler.ClientError) as err:
        handler.input_fn(b"x", "text/plain; charset=klingon")
    assert err.value.status_code == 400 and "klingon" in err.value.message
    with pytest.raises(handler.ClientError, match="UTF-8"):
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
    # one classify path: the same batch gives the same numbers
    assert via_handler == [
        {"label": p["label"], "score": round(p["score"], 6)} for p in via_predictor
    ]


def test_unreadable_csv_is_400():
    huge = "x" * 200_000  # over csv.field_size_limit(): the reader raises csv.Error
    with pytest.raises(handler.ClientError, match="not readable CSV") as err:
        handler.input_fn(f'"{huge}"\n'.encode(), "text/csv")
    assert err.value.status_code == 400


def test_warmup_runs_one_prediction(model, monkeypatch):
    calls = []
    monkeypatch.setattr(handler, "predict_fn", lambda data, m: calls.append(data))
    handler.model_warmup_fn("unused", model)
    assert calls == [["warm up"]]


PRETTY_JSON = '{\n  "inputs": [\n    "great phone",\n    "awful service"\n  ]\n}\n'


def crlf(text: str) -> str:
    return text.replace("\n", "\r\n")


def curl_data(file_bytes: bytes) -> bytes:
    """What `curl --data @file` sends: the file with CR and LF removed (--data-binary keeps
    them). Source: curl(1), --data: "carriage returns and newlines will be stripped out"."""
    return file_bytes.replace(b"\r", b"").replace(b"\n", b"")


READ_AS_MEANT = [
    # Windows: Notepad "UTF-8 with BOM", Windows PowerShell 5 `Out-File -Encoding utf8`
    ("notepad-bom-text", codecs.BOM_UTF8 + b"great phone\r\n", "text/plain", ["great phone"]),
    (
        "powershell5-outfile-utf8-json",
        codecs.BOM_UTF8 + crlf(PRETTY_JSON).encode(),
        "application/json",
        ["great phone", "awful service"],
    ),
    # Excel "CSV UTF-8 (Comma delimited)": BOM, CRLF, a header
    (
        "excel-csv-utf8",
        codecs.BOM_UTF8 + b'text\r\ngreat phone\r\n"awful, really"\r\n',
        "text/csv",
        ["great phone", "awful, really"],
    ),
    # a quoted CSV cell spanning lines, written on Windows
    (
        "csv-multiline-cell-crlf",
        b'"line one\r\nline two"\r\n',
        "text/csv",
        ["line one\nline two"],
    ),
    # classic Mac OS line endings
    ("csv-cr-only", b"great\rawful\r", "text/csv", ["great", "awful"]),
    # a text file saved on Windows with two lines, sent with curl --data-binary @file
    ("text-crlf-lines", b"line one\r\nline two\r\n", "text/plain", ["line one\nline two"]),
    # Linux/macOS editors end files with a newline: --data-binary keeps it
    ("text-trailing-newline", b"great phone\n", "text/plain", ["great phone"]),
    ("text-only-newline", b"\r\n", "text/plain", [""]),
    # curl --data @pretty.json strips newlines: still valid JSON
    (
        "curl-data-json",
        curl_data(crlf(PRETTY_JSON).encode()),
        "application/json",
        ["great phone", "awful service"],
    ),
    (
        "curl-data-binary-json",
        crlf(PRETTY_JSON).encode(),
        "application/json",
        ["great phone", "awful service"],
    ),
    # curl --data @texts.csv glues the rows into one (use --data-binary for CSV)
    ("curl-data-csv", curl_data(b"text\ngreat\nawful\n"), "text/csv", ["textgreatawful"]),
    # Python requests json=...: ASCII with \u escapes, no charset
    (
        "requests-json",
        json.dumps({"inputs": ["caf\u00e9 \u2615"]}).encode(),
        "application/json",
        ["caf\u00e9 \u2615"],
    ),
    # requests 2.34 (urllib3 2) data="café": UTF-8, no charset
    ("requests-data-str", "caf\u00e9".encode(), "text/plain", ["caf\u00e9"]),
    # charset spellings seen in the wild
    ("charset-quoted", "caf\u00e9".encode(), 'text/plain; charset="UTF-8"', ["caf\u00e9"]),
    (
        "charset-single-quoted",
        "caf\u00e9".encode(),
        "text/plain; charset='utf-8'",
        ["caf\u00e9"],
    ),
    ("charset-utf8-alias", "caf\u00e9".encode(), "text/plain;charset=utf8", ["caf\u00e9"]),
    ("charset-casing", "caf\u00e9".encode(), "Text/Plain; CHARSET=Utf-8", ["caf\u00e9"]),
    (
        "charset-latin1",
        "caf\u00e9".encode("latin-1"),
        "text/plain; charset=ISO-8859-1",
        ["caf\u00e9"],
    ),
    (
        "charset-cp1252",
        "na\u00efve \u2013 \u201cquoted\u201d".encode("cp1252"),
        "text/plain; charset=windows-1252",
        ["na\u00efve \u2013 \u201cquoted\u201d"],
    ),
    # UTF-16 declared (Windows PowerShell 5 file sent with charset=utf-16)
    (
        "utf16-declared",
        codecs.BOM_UTF16_LE + "great phone\r\n".encode("utf-16-le"),
        "text/plain; charset=utf-16",
        ["great phone"],
    ),
    # a UTF-8 BOM wins over a wrong charset label
    (
        "bom-beats-label",
        codecs.BOM_UTF8 + "caf\u00e9".encode(),
        "text/plain; charset=latin-1",
        ["caf\u00e9"],
    ),
    # a str that a caller decoded but kept the BOM of
    ("decoded-str-bom", "\ufefftext\r\ngreat\r\n", "text/csv", ["great"]),
    # JSON strings are used as sent (the client quoted them on purpose)
    (
        "json-strings-verbatim",
        b'{"inputs": [" spaced ", "a\\r\\nb"]}\n',
        "application/json",
        [" spaced ", "a\r\nb"],
    ),
]


CLIENT_MISTAKES = [
    # Windows PowerShell 5 `"great" > body.txt` writes UTF-16 LE with BOM
    (
        "powershell5-redirect",
        codecs.BOM_UTF16_LE + "great phone\r\n".encode("utf-16-le"),
        "text/plain",
        400,
        "charset=utf-16",
    ),
    # Python's http.client encodes a str body as ISO-8859-1 (checked here; requests 2.34 with
    # urllib3 2 sends UTF-8). Windows PowerShell 5 string bodies without a charset are said to go
    # out as ISO-8859-1 too (UNVERIFIED: not reproducible here).
    (
        "http-client-str-body",
        "caf\u00e9".encode("latin-1"),
        "text/plain",
        400,
        "charset=windows-1252",
    ),
    # curl --data without -H sends application/x-www-form-urlencoded
    (
        "curl-data-no-header",
        curl_data(PRETTY_JSON.encode()),
        "application/x-www-form-urlencoded",
        415,
        "-H 'Content-Type: application/json'",
    ),
    # cp1252 leaves 0x81 undefined
    (
        "cp1252-undefined-byte",
        b"caf\x81",
        "text/plain; charset=cp1252",
        400,
        "not valid cp1252",
    ),
]


@pytest.mark.parametrize(
    ("tool", "body", "content_type", "expected"), READ_AS_MEANT, ids=[c[0] for c in READ_AS_MEANT]
)
def test_client_bodies_are_read_as_meant(tool, body, content_type, expected):
    assert handler.input_fn(body, content_type) == expected, tool


@pytest.mark.parametrize(
    ("tool", "body", "content_type", "status", "message"),
    CLIENT_MISTAKES,
    ids=[c[0] for c in CLIENT_MISTAKES],
)
def test_client_mistakes_get_a_4xx_naming_the_fix(tool, body, content_type, status, message):
    with pytest.raises(handler.ClientError) as err:
        handler.input_fn(body, content_type)
    assert err.value.status_code == status, tool
    assert message in err.value.message, err.value.message


@pytest.mark.parametrize(
    ("body", "content_type"),
    [
        (codecs.BOM_UTF8 + b"great phone\r\n", "text/plain"),
        (b"great phone\n", "text/plain"),
        (b"  great phone  \r\n\r\n", "text/plain"),
        (codecs.BOM_UTF8 + b"text\r\ngreat phone\r\n", "text/csv"),
        (codecs.BOM_UTF16_LE + "great phone".encode("utf-16-le"), "text/plain; charset=utf-16"),
    ],
)
def test_client_spellings_get_the_clean_texts_prediction(model, body, content_type):
    clean = handler.predict_fn(handler.input_fn(b"great phone", "text/plain"), model)
    assert handler.predict_fn(handler.input_fn(body, content_type), model) == clean
