"""SageMaker PyTorch inference handler for a Hugging Face sequence classifier.

The SageMaker PyTorch serving toolkit (TorchServe) imports this file from ``code/`` of
``model.tar.gz`` and calls ``model_fn`` once, then ``input_fn`` -> ``predict_fn`` -> ``output_fn``
per request. It needs only torch and transformers (``code/requirements.txt``), not pt2aws.
The project's own serving image (``pt2aws.serving.server``, ``container/``) runs the same
functions, with the same status codes and bodies.

Request bodies:

* ``application/json``: ``{"inputs": "text"}``, ``{"inputs": ["a", "b"]}``, ``"text"`` or ``["a", "b"]``
* ``text/csv``: one text per row (a header row named ``text``/``inputs`` is skipped)
* ``text/plain``: the whole body is one text

Bodies may be bytes or str; a ``charset`` parameter other than UTF-8 is honoured
(``text/plain; charset=latin-1``, ``charset="UTF-8"``, ``charset=utf8``). A UTF-8 byte-order
mark (PowerShell ``Out-File -Encoding utf8``, Notepad) is dropped; UTF-16 (Windows PowerShell 5
``>`` redirection) is read when declared (``charset=utf-16``) and otherwise answered with a 400
that says so. CSV and plain-text bodies get Windows and old-Mac line endings (CRLF, CR) turned
into ``\n``, and each of their texts is stripped of surrounding whitespace (a file's trailing
newline would otherwise reach the model as a token); JSON strings are used exactly as sent.

Response, chosen by ``Accept`` (``application/json`` by default, ``text/csv``; lists with
q-values and wildcards such as ``text/*`` work): one entry per input, in order::

    [{"label": "positive", "score": 0.98}, ...]          # application/json
    label,score,empty,truncated                          # text/csv
    positive,0.98,false,false

Empty or whitespace texts get ``{"label": null, "score": null, "empty": true}`` at their index;
texts cut to the model's limit carry ``"truncated": true``. Bad requests raise the toolkit's
error type (``GenericInferenceToolkitError``), which it turns into a 4xx response whose body starts
with the message (415 unsupported type, 406 unsupported Accept, 400 bad body, 413 too many texts);
the toolkit appends its traceback after that first line. Any other exception would be a 500.

Environment: ``PT2AWS_VARIANT`` (``eager``, the default; ``auto``: the fastest variant on this
machine among those ``variants.json`` in the archive records as keeping 99% agreement, measured
at start-up; or a named one; needs the project's serving image),
``PT2AWS_LONG_TEXTS`` (``truncate``, the default, or ``windows``: texts over the
limit read as windows that overlap by ``PT2AWS_WINDOW_OVERLAP`` tokens, default a quarter of
the limit), ``PT2AWS_MAX_BATCH`` (default 64 texts per request), ``PT2AWS_MAX_LENGTH``
(default: the model's limit, 512 tokens for RoBERTa).
"""

from __future__ import annotations

import codecs
import csv
import io
import json
import os
import sys

import torch

try:  # inside the SageMaker container (and with the `serve` extra): the toolkit maps it to a 4xx
    from sagemaker_inference.errors import GenericInferenceToolkitError
except ImportError:  # plain torch + transformers

    class GenericInferenceToolkitError(Exception):
        """Same shape as ``sagemaker_inference.errors.GenericInferenceToolkitError``."""

        def __init__(self, status_code, message=None, phrase=None):
            self.status_code, self.message, self.phrase = (
                status_code,
                message or "Invalid Request",
                phrase,
            )
            super().__init__(status_code, self.message, phrase)


try:  # the toolkit decodes JSON/CSV bodies itself, before input_fn, and answers bad UTF-8 with a
    # 500 traceback (sagemaker_inference 1.10.1, transformer.py: `if content_type in UTF8_TYPES:
    # input_data = input_data.decode("utf-8")`). Emptying that list in place hands the raw bytes
    # to input_fn, which decodes them and answers bad UTF-8 with a 400 naming the problem.
    from sagemaker_inference import content_types as _toolkit_content_types

    _toolkit_content_types.UTF8_TYPES[:] = []
except ImportError:
    pass


JSON, CSV, TEXT = "application/json", "text/csv", "text/plain"
ACCEPTED_CONTENT_TYPES = (JSON, CSV, TEXT)
#: Default limit on texts per request; ``PT2AWS_MAX_BATCH`` overrides it (read per request).
MAX_BATCH = 64
#: RoBERTa's real input limit: its config lists 514 positions, 2 of which are padding offsets.
MODEL_MAX_TOKENS = 512


class UnsupportedMediaTypeError(GenericInferenceToolkitError):
    """HTTP 415: a request ``Content-Type`` the handler does not read."""

    def __init__(self, message: str):
        super().__init__(415, message, "Unsupported Media Type")


class NotAcceptableError(GenericInferenceToolkitError):
    """HTTP 406: an ``Accept`` type the handler cannot produce."""

    def __init__(self, message: str):
        super().__init__(406, message, "Not Acceptable")


class BadRequestError(GenericInferenceToolkitError):
    """HTTP 400: the body cannot be read."""

    def __init__(self, message: str):
        super().__init__(400, message, "Bad Request")


class PayloadTooLargeError(GenericInferenceToolkitError, ValueError):
    """HTTP 413: a request too large for the endpoint. This handler raises it for more texts
    than ``PT2AWS_MAX_BATCH`` in one request; pt2aws's endpoint client (``pt2aws.aws.invoke``)
    for a request over the real-time payload limit, before sending it. Also a ``ValueError``:
    input the caller can fix (the command line reports it in one line)."""

    def __init__(self, message: str):
        super().__init__(413, message, "Payload Too Large")

    def __str__(self) -> str:
        return self.message


def _media_type(content_type: str | None) -> str:
    return (content_type or JSON).split(";")[0].strip().lower()


def _charset(content_type: str | None) -> str:
    for param in (content_type or "").split(";")[1:]:
        key, _, value = param.partition("=")
        if key.strip().lower() == "charset" and value.strip():
            return value.strip().strip("\"'").strip().lower()
    return "utf-8"


def _decode(body: bytes, content_type: str | None) -> str:
    """Body bytes to text, without a leading byte-order mark.

    A UTF-8 BOM wins over the declared charset (as in the WHATWG Encoding Standard); otherwise
    the ``charset`` parameter, else UTF-8, decides. A UTF-16 BOM is read only when the charset
    says UTF-16: guessing would turn a mislabelled body into confident predictions on garbage,
    so an undeclared UTF-16 body gets a 400 that names the fix.
    """
    charset = "utf-8" if body.startswith(codecs.BOM_UTF8) else _charset(content_type)
    try:
        return body.decode(charset).removeprefix("\ufeff")
    except LookupError:
        raise BadRequestError(
            f"unknown charset {charset!r} in Content-Type {content_type!r}; send UTF-8"
        ) from None
    except UnicodeDecodeError as err:
        name = "UTF-8" if charset.replace("-", "").replace("_", "") == "utf8" else charset
        if body[:2] in (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE):
            hint = (
                "it starts with a UTF-16 byte-order mark (Windows PowerShell 5 '>' writes UTF-16): "
                "send UTF-8 (Out-File -Encoding utf8) or add '; charset=utf-16' to Content-Type"
            )
        else:
            hint = (
                "encode text as UTF-8, or name its encoding in Content-Type "
                "(e.g. text/plain; charset=windows-1252)"
            )
        raise BadRequestError(
            f"request body is not valid {name} ({err.reason} at byte {err.start}); {hint}"
        ) from None


def _text_lines(text: str) -> str:
    """CRLF and lone CR (Windows, old Mac) as LF."""
    return text.replace("\r\n", "\n").replace("\r", "\n")


def max_batch() -> int:
    """Texts allowed per request: ``PT2AWS_MAX_BATCH`` from the environment, else 64.

    Raises:
        ValueError: ``PT2AWS_MAX_BATCH`` is not a positive integer.
    """
    raw = os.environ.get("PT2AWS_MAX_BATCH", str(MAX_BATCH))
    if not raw.strip().isdigit() or int(raw) < 1:
        raise ValueError(f"PT2AWS_MAX_BATCH={raw!r}: set a positive integer, e.g. 64")
    return int(raw)


def model_fn(model_dir: str, context=None) -> dict:
    """Load tokenizer and model from ``model_dir`` (the extracted ``model.tar.gz``).

    Raises:
        FileNotFoundError: ``model_dir`` has no ``config.json`` (an archive with a top folder,
            or without the files ``save_pretrained`` writes).
    """
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    if not os.path.isfile(os.path.join(model_dir, "config.json")):
        raise FileNotFoundError(
            f"{model_dir} has no config.json: model.tar.gz must hold the files written by "
            "save_pretrained (config.json, weights, tokenizer) at its root, not in a folder"
        )

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForSequenceClassification.from_pretrained(model_dir).eval()
    limit = getattr(model.config, "max_position_embeddings", MODEL_MAX_TOKENS)
    if getattr(model.config, "model_type", "") in ("roberta", "xlm-roberta", "camembert"):
        limit -= 2  # fairseq position offset
    max_length = int(
        os.environ.get(
            "PT2AWS_MAX_LENGTH", min(limit, tokenizer.model_max_length, MODEL_MAX_TOKENS)
        )
    )
    variant, reason = os.environ.get("PT2AWS_VARIANT", "eager").strip().lower(), "default"
    if variant != "eager":
        try:  # the project's serving image has pt2aws (and torchao); the AWS DLC does not
            from pt2aws.inference.selection import serving_variant
        except ImportError:
            raise RuntimeError(
                f"PT2AWS_VARIANT={variant} needs the pt2aws serving image (container/); the AWS "
                "DLC serves fp32 eager: unset PT2AWS_VARIANT"
            ) from None
        model, variant, reason = serving_variant(model_dir, model, variant)
    print(f"pt2aws handler: serving variant {variant} ({reason})", flush=True)
    long_texts = os.environ.get("PT2AWS_LONG_TEXTS", "truncate").strip().lower()
    if long_texts not in ("truncate", "windows"):
        raise ValueError(f"PT2AWS_LONG_TEXTS={long_texts!r}: set truncate or windows")
    overlap = int(os.environ.get("PT2AWS_WINDOW_OVERLAP", max_length // 4))
    return {
        "tokenizer": tokenizer,
        "model": model,
        "max_length": max_length,
        "long_texts": long_texts,
        "window_overlap": overlap,
        "variant": variant,
    }


def model_warmup_fn(model_dir: str, model: dict, context=None) -> None:
    """One prediction at load time (the toolkit calls this after ``model_fn``), so the first
    client request does not pay the first forward pass's one-off costs (kernel selection,
    allocator warm-up)."""
    predict_fn(["warm up"], model)


def input_fn(input_data, content_type, context=None) -> list[str]:
    """Decode a request body into a list of texts.

    Raises:
        UnsupportedMediaTypeError: (415) content type other than JSON, CSV or plain text.
        BadRequestError: (400) body not UTF-8, malformed JSON, or JSON of the wrong shape.
        PayloadTooLargeError: (413) more than ``PT2AWS_MAX_BATCH`` texts.
    """
    media = _media_type(content_type)
    if media not in ACCEPTED_CONTENT_TYPES:
        hint = (
            " (curl --data sends this type: add -H 'Content-Type: application/json')"
            if media == "application/x-www-form-urlencoded"
            else ""
        )
        raise UnsupportedMediaTypeError(
            f"content type {content_type!r} is not supported; send one of "
            f"{', '.join(ACCEPTED_CONTENT_TYPES)}{hint}"
        )
    if isinstance(input_data, (bytes, bytearray, memoryview)):
        input_data = _decode(bytes(input_data), content_type)
    else:  # already decoded by the caller: drop a BOM it kept
        input_data = input_data.removeprefix("\ufeff")
    if media == TEXT:
        texts = [_text_lines(input_data).strip()]
    elif media == CSV:
        try:
            rows = [row for row in csv.reader(io.StringIO(_text_lines(input_data))) if row]
        except csv.Error as err:  # e.g. a field over csv.field_size_limit() (131072 chars)
            raise BadRequestError(f"request body is not readable CSV: {err}") from None
        if rows and rows[0][0].strip().lower() in ("text", "inputs"):
            rows = rows[1:]
        texts = [",".join(row).strip() for row in rows]
    else:
        try:
            payload = json.loads(input_data)
        except json.JSONDecodeError as err:
            raise BadRequestError(
                f"request body is not valid JSON: {err.msg} at position {err.pos}"
            ) from None
        if isinstance(payload, dict):
            if "inputs" not in payload:
                raise BadRequestError(
                    'JSON object must have an "inputs" key: {"inputs": "text"} or {"inputs": ["a", "b"]}'
                )
            payload = payload["inputs"]
        texts = [payload] if isinstance(payload, str) else payload
        if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
            raise BadRequestError('"inputs" must be a string or a list of strings')
    limit = max_batch()
    if len(texts) > limit:
        raise PayloadTooLargeError(
            f"{len(texts)} texts in one request; the limit is {limit} (PT2AWS_MAX_BATCH): split the batch"
        )
    return texts


def _windows_module():
    """The long-text windows module (standard library only): ``code/pt2aws_windows.py`` of the
    archive (:func:`pt2aws.aws.artifact.package` ships it; the toolkit puts ``code/`` on
    ``sys.path``), else ``pt2aws/data/windows.py`` beside this package, loaded as a file so
    that ``pt2aws.data``'s heavier imports (pandas, datasets) are not needed."""
    try:
        import pt2aws_windows

        return pt2aws_windows
    except ImportError:
        import importlib.util
        from pathlib import Path

        path = Path(__file__).resolve().parents[1] / "data" / "windows.py"
        spec = importlib.util.spec_from_file_location("pt2aws_windows", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        sys.modules["pt2aws_windows"] = module
        return module


def _windowed_probs(texts: list[str], model: dict) -> tuple[torch.Tensor, list[int]]:
    """Class probabilities per text from overlapping windows of at most ``max_length`` tokens
    (``PT2AWS_LONG_TEXTS=windows``), and the number of windows each text needed."""
    windows = _windows_module()
    tokenizer, net = model["tokenizer"], model["model"]
    ids = tokenizer(texts, add_special_tokens=False, truncation=False)["input_ids"]
    prefix, suffix = windows.special_tokens(tokenizer)
    spans, owners, weights = windows.plan_windows(
        ids,
        max_tokens=model["max_length"],
        overlap=model["window_overlap"],
        prefix=prefix,
        suffix=suffix,
    )
    batch = tokenizer.pad({"input_ids": spans}, return_tensors="pt")
    with torch.inference_mode():
        per_window = net(**batch).logits.float().softmax(-1).tolist()
    combined = windows.combine_by_text(per_window, owners, len(texts), weights=weights)
    return torch.tensor(combined), [owners.count(k) for k in range(len(texts))]


def predict_fn(data: list[str], model: dict, context=None) -> list[dict]:
    """Classify ``data``; one result per text, in input order.

    A text longer than ``max_length`` tokens is cut and flagged ``"truncated": true``, or, with
    ``PT2AWS_LONG_TEXTS=windows``, read as overlapping windows whose probabilities are averaged
    (weighted by tokens) and flagged ``"windows": n``.
    """
    tokenizer, net, max_length = model["tokenizer"], model["model"], model["max_length"]
    results: list[dict] = [{"label": None, "score": None, "empty": True} for _ in data]
    index = [i for i, t in enumerate(data) if t.strip()]
    if not index:
        return results
    texts = [data[i] for i in index]
    full = tokenizer(texts, truncation=False)["input_ids"]
    counts = [1] * len(texts)
    if model.get("long_texts") == "windows" and any(len(f) > max_length for f in full):
        probs, counts = _windowed_probs(texts, model)
    else:
        enc = tokenizer(
            texts, truncation=True, max_length=max_length, padding=True, return_tensors="pt"
        )
        with torch.inference_mode():
            probs = net(**enc).logits.float().softmax(-1)
    scores, ids = probs.max(-1)
    for k, i in enumerate(index):
        results[i] = {
            "label": net.config.id2label[int(ids[k])],
            "score": round(float(scores[k]), 6),
        }
        if counts[k] > 1:
            results[i]["windows"] = counts[k]
        elif len(full[k]) > max_length:
            results[i]["truncated"] = True
    return results


def _choose_accept(accept: str | None) -> str:
    """The response media type for an ``Accept`` header (comma list, q-values, wildcards)."""
    options = []
    for pos, part in enumerate((accept or "").split(",")):
        media, *params = [x.strip() for x in part.split(";")]
        if not media:
            continue
        q = 1.0
        for param in params:
            key, _, value = param.partition("=")
            if key.strip().lower() == "q":
                try:
                    q = float(value)
                except ValueError:
                    q = 0.0
        if q > 0:
            options.append((-q, pos, media.lower()))
    if not (accept or "").strip():
        return JSON
    for _, _, media in sorted(options):
        if media in (JSON, CSV):
            return media
        if media in ("*/*", "application/*"):
            return JSON
        if media == "text/*":
            return CSV
    raise NotAcceptableError(f"Accept {accept!r} is not supported; ask for {JSON} or {CSV}")


def output_fn(prediction: list[dict], accept=None, context=None):
    """Encode predictions as JSON (default) or CSV, chosen by ``accept``.

    CSV has a header ``label,score,empty,truncated`` and one row per input (empty texts: blank
    label and score, ``empty`` = ``true``).

    Returns:
        The body as ``str`` when ``accept`` names exactly the type sent (the usual case; both the
        PyTorch and the Hugging Face toolkits send a string as is); otherwise
        ``(body, content_type)``, which the PyTorch toolkit uses for the response's
        ``Content-Type`` (so ``Accept: text/*`` gets ``text/csv``, not ``text/*``).

    Raises:
        NotAcceptableError: (406) an ``Accept`` that allows neither JSON nor CSV.
    """
    media = _choose_accept(accept)
    if media == JSON:
        body = json.dumps(prediction)
    else:
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(["label", "score", "empty", "truncated"])
        for p in prediction:
            writer.writerow(
                [
                    p["label"] or "",
                    "" if p["score"] is None else p["score"],
                    "true" if p.get("empty") else "false",
                    "true" if p.get("truncated") else "false",
                ]
            )
        body = out.getvalue()
    return body if (accept or JSON).strip() == media else (body, media)
