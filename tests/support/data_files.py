"""Small labelled data files for the data-reading tests (``tests/unit/data``)."""

import pandas as pd

TEXTS = {
    "positive": ["Très bien, café génial", "loved it, 10/10", 'a "great" read,\nsecond line'],
    "negative": ["Schön? Nein: schrecklich", "awful, never again", "meh; boring\tand slow"],
}


def rows(n_per_class: int = 12, labels=("positive", "negative")) -> list[tuple[str, str]]:
    """Distinct texts with tricky characters (accents, commas, quotes, line breaks, tabs)."""
    out = []
    for i in range(n_per_class):
        for name, label in zip(("positive", "negative"), labels):
            out.append((f"{TEXTS[name][i % 3]} #{i}", label))
    return out


def write_csv(path, data, *, header=True, sep=",", encoding="utf-8", names=("text", "label")):
    frame = pd.DataFrame(data, columns=list(names))
    path.write_bytes(frame.to_csv(sep=sep, index=False, header=header).encode(encoding))
    return str(path)


def texts_of(d) -> set[str]:
    return {t for split in d.splits.values() for t in split["text"]}
