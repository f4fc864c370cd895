"""SageMaker PyTorch inference handler for a Hugging Face sequence classifier, shipped in
``model.tar.gz`` as ``code/inference.py`` (needs only torch and transformers): ``model_fn`` once,
then ``input_fn`` -> ``predict_fn`` -> ``output_fn`` per request; :func:`classify` is also what
:class:`pt2aws.inference.predictor.Predictor` runs.

Requests: ``application/json`` (``{"inputs": "text" | ["a", "b"]}``, or a bare string or list),
``text/csv`` (a text per row; a ``text``/``inputs`` header skipped), ``text/plain`` (one text), in
their ``charset`` (a UTF-8 BOM wins). Answers by ``Accept`` (JSON or CSV), a ``{"label", "score"}``
per text, ``"empty"``, ``"truncated"`` or ``"windows": n`` where so. Client mistakes raise the
toolkit's 4xx: 415 content type, 406 Accept, 400 body, 413 over ``PT2AWS_MAX_BATCH`` texts.

Environment: ``PT2AWS_VARIANT`` (``eager``; others need the pt2aws serving image),
``PT2AWS_LONG_TEXTS`` (``truncate`` | ``windows``), ``PT2AWS_WINDOW_OVERLAP`` (tokens, default a
quarter), ``PT2AWS_MAX_BATCH`` (64), ``PT2AWS_MAX_LENGTH`` (default: the model's limit).
"""

from __future__ import annotations

import codecs
import csv
import email.message
import io
import json
import os
import re
from http import HTTPStatus

import torch

try:  # inside the SageMaker container the toolkit answers a BaseInferenceToolkitError with its
    # status, message and phrase; it decodes JSON/CSV as UTF-8 before input_fn and answers bad
    # bytes with a 500 (sagemaker_inference 1.10.1 transformer.py): emptying its list hands
    # input_fn the bytes
    from sagemaker_inference import content_types as _toolkit_types
    from sagemaker_inference.errors import BaseInferenceToolkitError as _ToolkitError

    _toolkit_types.UTF8_TYPES[:] = []
except ImportError:
    _ToolkitError = Exception

JSON, CSV, TEXT = "application/json", "text/csv", "text/plain"
MAX_BATCH = 64
#: RoBERTa's input limit: 514 positions, 2 of them a padding offset.
MODEL_MAX_TOKENS = 512
#: Model types whose position ids start after a 2-slot padding offset.
OFFSET_POSITION_MODELS = ("roberta", "xlm-roberta", "camembert", "longformer")
#: ``(model_dir, model, variant, tokenizer) -> (model, variant, reason)`` for a variant other than
#: eager: the pt2aws serving image's server sets it (the AWS DLC has none).
choose_variant = None


class ClientError(_ToolkitError):
    """A client mistake (the module's 4xx), answered as HTTP ``status_code`` with ``message``."""

    def __init__(self, status: int, message: str):
        self.status_code, self.message, self.phrase = status, message, HTTPStatus(status).phrase
        Exception.__init__(self, status, message, self.phrase)

    def __str__(self) -> str:
        return self.message


class PayloadTooLargeError(ClientError, ValueError):
    """HTTP 413: too many texts for one request (also raised by ``pt2aws.aws.invoke``)."""

    def __init__(self, message: str):
        super().__init__(413, message)


def _decode(body: bytes, content_type: str | None) -> str:
    """Body bytes to text in its ``charset`` (default UTF-8); a UTF-8 BOM wins (WHATWG Encoding)."""
    header = email.message.Message()
    header["content-type"] = content_type or ""
    charset = (header.get_content_charset() or "").strip("\"' ") or "utf-8"
    charset = "utf-8" if body.startswith(codecs.BOM_UTF8) else charset
    try:
        return body.decode(charset).removeprefix("\ufeff")
    except UnicodeDecodeError as err:
        name = "UTF-8" if charset.replace("-", "").replace("_", "") == "utf8" else charset
        hint = "encode it as UTF-8 or name its charset (e.g. text/plain; charset=windows-1252)"
        if body[:2] in (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE):
            hint = "it has a UTF-16 byte-order mark (Windows PowerShell 5 '>'): send UTF-8 or add "
            hint += "'; charset=utf-16' to Content-Type"
        why = f"{err.reason} at byte {err.start}"
        raise ClientError(400, f"request body is not valid {name} ({why}); {hint}") from None
    except (LookupError, UnicodeError, ValueError) as err:  # unknown, or idna/punycode
        why = f"request body cannot be read as {charset!r} ({err}); send UTF-8"
        raise ClientError(400, why) from None


def max_tokens(config, tokenizer=None) -> int:
    """The longest input the model accepts (special tokens included): its positions less
    RoBERTa's offset, capped by the tokenizer's ``model_max_length`` and 512."""
    limit = int(getattr(config, "max_position_embeddings", MODEL_MAX_TOKENS))
    if getattr(config, "model_type", "") in OFFSET_POSITION_MODELS:
        limit -= 2
    if tokenizer is not None and int(tokenizer.model_max_length) > 0:
        limit = min(limit, int(tokenizer.model_max_length))
    return min(limit, MODEL_MAX_TOKENS)


def model_fn(model_dir: str, context=None) -> dict:
    """Tokenizer and model from ``model_dir`` (the extracted ``model.tar.gz``). Raises
    FileNotFoundError (no ``config.json`` at its root), ValueError (a bad ``PT2AWS_*`` setting),
    RuntimeError (a variant other than eager without :data:`choose_variant`: the AWS DLC)."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    if not os.path.isfile(os.path.join(model_dir, "config.json")):
        raise FileNotFoundError(f"{model_dir} has no config.json: model.tar.gz must hold what "
                                "save_pretrained wrote at its root, not in a folder")  # fmt: skip
    long_texts = os.environ.get("PT2AWS_LONG_TEXTS", "truncate").strip().lower()
    if long_texts not in ("truncate", "windows"):
        raise ValueError(f"PT2AWS_LONG_TEXTS={long_texts!r}: set truncate or windows")
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForSequenceClassification.from_pretrained(model_dir).eval()
    max_length = int(os.environ.get("PT2AWS_MAX_LENGTH", max_tokens(model.config, tokenizer)))
    variant, reason = os.environ.get("PT2AWS_VARIANT", "eager").strip().lower(), "default"
    if variant != "eager":
        if choose_variant is None:
            raise RuntimeError(f"PT2AWS_VARIANT={variant} needs the pt2aws serving image "
                               "(container/); the AWS DLC serves fp32 eager: unset it")  # fmt: skip
        model, variant, reason = choose_variant(model_dir, model, variant, tokenizer)
    print(f"pt2aws handler: serving variant {variant} ({reason})", flush=True)
    if (fast := os.environ.get("DNNL_DEFAULT_FPMATH_MODE", "").upper()) in ("BF16", "ANY"):
        print(f"pt2aws handler: DNNL_DEFAULT_FPMATH_MODE={fast}: fp32 matrix products run in bf16, "
              "so labels can differ from the agreement recorded at packaging", flush=True)  # fmt: skip
    stride = int(os.environ.get("PT2AWS_WINDOW_OVERLAP", max_length // 4))
    return {"tokenizer": tokenizer, "model": model, "max_length": max_length,
            "long_texts": long_texts, "stride": stride, "variant": variant}  # fmt: skip


def model_warmup_fn(model_dir: str, model: dict, context=None) -> None:
    """One prediction at load time: the first request skips the one-off costs."""
    predict_fn(["warm up"], model)


def input_fn(input_data, content_type, context=None) -> list[str]:
    """A request body (bytes or str) as a list of texts; 415 not JSON, CSV or plain text, 400
    not in its charset, bad JSON or CSV, an unpaired surrogate, 413 over ``PT2AWS_MAX_BATCH``."""
    media = (content_type or JSON).split(";")[0].strip().lower()
    if media not in (JSON, CSV, TEXT):
        hint = f"content type {content_type!r} is not supported; send one of {JSON}, {CSV}, {TEXT}"
        if media == "application/x-www-form-urlencoded":
            hint += " (curl --data sends this type: add -H 'Content-Type: application/json')"
        raise ClientError(415, hint)
    if isinstance(input_data, (bytes, bytearray, memoryview)):
        text = _decode(bytes(input_data), content_type)
    else:
        text = input_data.removeprefix("\ufeff")
    text = text.replace("\r\n", "\n").replace("\r", "\n")  # Windows and classic Mac OS lines
    if media == TEXT:
        texts = [text.strip()]
    elif media == CSV:
        try:
            rows = [row for row in csv.reader(io.StringIO(text)) if row]
        except csv.Error as err:  # e.g. a field over csv.field_size_limit()
            raise ClientError(400, f"request body is not readable CSV: {err}") from None
        if rows and rows[0][0].strip().lower() in ("text", "inputs"):
            rows = rows[1:]
        texts = [",".join(row).strip() for row in rows]
    else:
        try:
            payload = json.loads(text)
        except json.JSONDecodeError as err:
            where = f"{err.msg} at position {err.pos}"
            raise ClientError(400, f"request body is not valid JSON: {where}") from None
        except RecursionError:
            raise ClientError(400, 'JSON nested too deeply; send {"inputs": ["a", "b"]}') from None
        if isinstance(payload, dict) and "inputs" not in payload:
            raise ClientError(400, 'JSON object must have an "inputs" key: {"inputs": ["a", "b"]}')
        payload = payload["inputs"] if isinstance(payload, dict) else payload
        texts = [payload] if isinstance(payload, str) else payload
        if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
            raise ClientError(400, '"inputs" must be a string or a list of strings')
    for i, item in enumerate(texts):  # a JSON "\ud800" escape: no tokenizer reads it
        if bad := re.search("[\ud800-\udfff]", item):
            raise ClientError(400, f"text {i}: unpaired surrogate {bad[0]!r}; send valid Unicode")
    limit = os.environ.get("PT2AWS_MAX_BATCH", str(MAX_BATCH)).strip()
    if not limit.isdigit() or int(limit) < 1:  # the server's setting: a 500
        raise ValueError(f"PT2AWS_MAX_BATCH={limit!r}: set a positive integer, e.g. 64")
    if len(texts) > int(limit):
        too_many = f"{len(texts)} texts in one request; the limit is {limit} (PT2AWS_MAX_BATCH)"
        raise PayloadTooLargeError(f"{too_many}: split the batch")
    return texts


@torch.inference_mode()
def classify(texts, tokenizer, model, max_length: int, *, stride: int | None = None,
             batch_size: int = MAX_BATCH, device="cpu") -> tuple[torch.Tensor, list[int]]:  # fmt: skip
    """``(probs, windows)``: float32 ``(len(texts), num_labels)`` in input order, and per text
    its windows of ``max_length`` tokens overlapping by ``stride`` (the fast tokenizer's
    overflow). ``stride=None`` reads the first window (truncation); else a text's probabilities
    are its windows' mean weighted by their tokens. ``batch_size`` windows a pass, by length."""
    n, num_labels = len(texts), model.config.num_labels
    if n == 0:
        return torch.empty(0, num_labels), []
    enc = tokenizer(list(texts), truncation=True, max_length=max_length, stride=stride or 0,
                    return_overflowing_tokens=True)  # fmt: skip
    owner = list(enc.pop("overflow_to_sample_mapping"))
    spans = [owner.count(k) for k in range(n)] if stride is None else None
    keep = [i for i, o in enumerate(owner) if stride is not None or i == 0 or owner[i - 1] != o]
    rows = [{key: enc[key][i] for key in enc.keys()} for i in keep]
    probs = torch.empty(len(rows), num_labels)
    order = sorted(range(len(rows)), key=lambda i: len(rows[i]["input_ids"]))
    for start in range(0, len(order), batch_size):
        idx = order[start : start + batch_size]
        batch = tokenizer.pad([rows[i] for i in idx], return_tensors="pt").to(device)
        probs[idx] = model(**batch).logits.float().softmax(-1).cpu()
    if stride is None:
        return probs, spans
    owners = torch.tensor(owner)
    specials = tokenizer.num_special_tokens_to_add()
    weights = torch.tensor([max(1, len(r["input_ids"]) - specials) for r in rows]).float()
    total = torch.zeros(n, num_labels).index_add_(0, owners, probs * weights[:, None])
    total /= torch.zeros(n).index_add_(0, owners, weights)[:, None]
    return total, torch.bincount(owners, minlength=n).tolist()


def predict_fn(data: list[str], model: dict, context=None) -> list[dict]:
    """``{"label", "score"}`` per text (:func:`classify`), plus ``"truncated": True`` or
    ``"windows": n`` over ``max_length`` tokens; empty texts ``"empty": True``, label None."""
    results: list[dict] = [{"label": None, "score": None, "empty": True} for _ in data]
    index = [i for i, t in enumerate(data) if t.strip()]
    windows = model.get("long_texts") == "windows"
    probs, spans = classify([data[i] for i in index], model["tokenizer"], model["model"],
                            model["max_length"], stride=model["stride"] if windows else None)  # fmt: skip
    scores, ids = probs.max(-1) if index else ([], [])
    id2label = model["model"].config.id2label
    for k, i in enumerate(index):
        results[i] = {"label": id2label[int(ids[k])], "score": round(float(scores[k]), 6)}
        if spans[k] > 1:
            results[i].update({"windows": spans[k]} if windows else {"truncated": True})
    return results


def _choose_accept(accept: str | None) -> str:
    """The response type for an ``Accept`` header (comma list, q-values, wildcards)."""
    if not (accept or "").strip():
        return JSON
    ranked = []
    for part in accept.split(","):
        media, *params = [x.strip().lower() for x in part.split(";")]
        q = dict(p.partition("=")[::2] for p in params).get("q", "1").strip()
        ranked.append((float(q) if re.fullmatch(r"\d+(\.\d*)?", q) else 0.0, media))
    answers = {JSON: JSON, CSV: CSV, "*/*": JSON, "application/*": JSON, "text/*": CSV}
    for q, media in sorted(ranked, key=lambda r: -r[0]):  # stable: ties keep their order
        if q > 0 and media in answers:
            return answers[media]
    raise ClientError(406, f"Accept {accept!r} is not supported; ask for {JSON} or {CSV}")


def output_fn(prediction: list[dict], accept=None, context=None):
    """Predictions as JSON or CSV (``label,score,empty,truncated``) by ``accept``: the body, or
    ``(body, content_type)`` where ``accept`` does not name it (the toolkit's ``Content-Type``).
    a 406 ClientError where ``accept`` allows neither."""
    media = _choose_accept(accept)
    if media == JSON:
        body = json.dumps(prediction)
    else:
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(["label", "score", "empty", "truncated"])
        writer.writerows([p["label"] or "", "" if p["score"] is None else p["score"],
                          *(str(bool(p.get(k))).lower() for k in ("empty", "truncated"))]
                         for p in prediction)  # fmt: skip
        body = out.getvalue()
    return body if (accept or JSON).strip() == media else (body, media)
