"""Turn a data file's bytes into text: a given encoding, or detection with a named fallback.

``encoding="auto"`` tries, in order, and records which step decided:

1. a byte-order mark (UTF-8, UTF-16 or UTF-32 with BOM);
2. strict UTF-8 (files with NUL bytes skip this step: they are UTF-16/32 without a BOM);
3. ``charset-normalizer`` (a dependency of pt2aws), whose guess is kept only when it decodes
   the whole file. Between Latin-script code pages it guesses almost at random (French saved
   as cp1252 came back as cp1250, turning "très" into "trčs", on these machines), so when its
   guess decodes to Latin letters only and ``cp1252`` (Windows Western European, what
   spreadsheet programs save) decodes the file to at least as many letters, ``cp1252`` wins;
   a non-Latin guess (``cp1251`` Cyrillic, ``cp1253`` Greek, ``cp932`` Japanese) stands.
   Without charset-normalizer, ``cp1252`` is tried instead;
4. latin-1, which decodes any bytes, so a wrong guess shows as odd characters, never an error.

A file decoded by step 3 or 4 is logged as a warning naming the encoding and the option that
sets it, since a guess can be wrong.
"""

from __future__ import annotations

import codecs
import logging
import unicodedata

from pt2aws.data.errors import DataError, option

logger = logging.getLogger(__name__)

#: Byte-order marks, longest first (a UTF-32-LE BOM starts with the UTF-16-LE one).
BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)
FALLBACK_ENCODING = "latin-1"
FALLBACK_HOW = "fallback: latin-1 decodes any bytes"
#: Windows Western European: preferred among Latin-script single-byte guesses (step 3).
WESTERN = "cp1252"
#: First word of the Unicode names of letters that a single-byte non-Latin code page decodes to.
NON_LATIN_SCRIPTS = frozenset(
    "ARABIC ARMENIAN CYRILLIC GEORGIAN GREEK HEBREW THAI DEVANAGARI CJK HANGUL HIRAGANA KATAKANA".split()
)
#: Bytes handed to charset-normalizer at most (it takes about 2.5 s for 4.5 MB on 2 cores).
DETECTION_SAMPLE_BYTES = 1 << 20


def decode_bytes(raw: bytes, encoding: str = "auto", *, name: str = "data") -> tuple[str, str, str]:
    """Decode ``raw`` with ``encoding``, or detect it when ``encoding`` is ``"auto"``.

    Args:
        raw: the file's bytes.
        encoding: a Python codec name (``"utf-8"``, ``"latin-1"``, ``"utf-16"``, ``"cp1252"``,
            ...) or ``"auto"``. ``"utf-8"`` also accepts (and drops) a UTF-8 byte-order mark.
        name: the file's name, for messages.

    Returns:
        ``(text, encoding_used, how)``; ``how`` says what decided, e.g. ``"given"``,
        ``"byte-order mark"``, ``"valid UTF-8"``, ``"detected by charset-normalizer"``,
        ``"charset-normalizer guessed cp1250; Latin script, read as cp1252"`` or
        :data:`FALLBACK_HOW`.

    Raises:
        DataError: an unknown codec name, or bytes that are not valid in the given encoding
            (the message names the byte offset and line, and the options that fix it).
    """
    if encoding.strip().lower() != "auto":
        return _decode_given(raw, encoding.strip(), name), encoding.strip(), "given"
    for bom, codec in BOMS:
        if raw.startswith(bom):
            return raw.decode(codec), codec, "byte-order mark"
    if b"\x00" not in raw[:4096]:
        try:
            return raw.decode("utf-8"), "utf-8", "valid UTF-8"
        except UnicodeDecodeError as err:
            bad_at = err.start
    else:
        bad_at = 0
    codec, how = _detect(raw, bad_at)
    text = _try_decode(raw, codec) if codec else None
    if text is None:  # the guess was made on a sample; the whole file disagrees
        codec, how, text = FALLBACK_ENCODING, FALLBACK_HOW, raw.decode(FALLBACK_ENCODING)
    logger.warning(
        "%s is not UTF-8: decoded as %s (%s); if characters look wrong, set the file's "
        "encoding, e.g. %s",
        name,
        codec,
        how,
        option("encoding", "cp1252"),
    )
    return text, codec, how


def _decode_given(raw: bytes, encoding: str, name: str) -> str:
    codec = "utf-8-sig" if encoding.lower().replace("_", "-") in ("utf-8", "utf8") else encoding
    try:
        return raw.decode(codec)
    except LookupError:
        raise DataError(
            f"{name}: unknown encoding {encoding!r}; use a Python codec name such as utf-8, "
            f"latin-1, cp1252 or utf-16, or {option('encoding', 'auto')} to detect it"
        ) from None
    except UnicodeDecodeError as err:
        line = raw[: err.start].count(b"\n") + 1
        raise DataError(
            f"{name}: not valid {encoding} (byte 0x{raw[err.start]:02x} at offset {err.start}, "
            f"line {line}); set the file's encoding, e.g. {option('encoding', 'latin-1')}, "
            f"or {option('encoding', 'auto')} to detect it"
        ) from None


def _detect(raw: bytes, bad_at: int) -> tuple[str | None, str]:
    """``(encoding, how)`` that step 3 settles on; the encoding is ``None`` when it finds none.

    The sample is the start of the file plus the bytes from the first non-UTF-8 byte on, so a
    large file whose first special character comes late is still judged on it.
    """
    half = DETECTION_SAMPLE_BYTES // 2
    sample = raw if len(raw) <= DETECTION_SAMPLE_BYTES else raw[:half] + raw[bad_at : bad_at + half]
    try:
        from charset_normalizer import from_bytes
    except ImportError:
        return WESTERN, "charset-normalizer is not installed; cp1252 tried"
    best = from_bytes(sample).best()
    if best is None:
        return None, ""
    guess = codecs.lookup(best.encoding).name
    guess_text = _try_decode(sample, guess)
    single_byte = guess_text is not None and len(guess_text) == len(sample)
    if guess == WESTERN or not single_byte or b"\x00" in sample or not _latin_only(guess_text):
        return guess, "detected by charset-normalizer"
    codec = WESTERN if _try_decode(sample, WESTERN) is not None else FALLBACK_ENCODING
    if _letter_share(sample.decode(codec)) >= _letter_share(guess_text):
        return codec, f"charset-normalizer guessed {guess}; Latin script, read as {codec}"
    return guess, "detected by charset-normalizer"


def _try_decode(raw: bytes, encoding: str) -> str | None:
    try:
        return raw.decode(encoding)
    except (UnicodeDecodeError, LookupError):
        return None


def _latin_only(text: str) -> bool:
    """True when no letter in ``text`` belongs to a non-Latin script (by its Unicode name)."""
    return not any(
        unicodedata.name(c, "").split(" ")[0] in NON_LATIN_SCRIPTS for c in set(text) if c.isalpha()
    )


def _letter_share(text: str) -> float:
    """Share of the non-ASCII characters in ``text`` that are letters or common punctuation."""
    special = [c for c in text if ord(c) > 127]
    if not special:
        return 1.0
    return sum(c.isalpha() or _punctuation(c) for c in special) / len(special)


def _punctuation(c: str) -> bool:
    return unicodedata.category(c)[0] == "P" or c in "€°"
