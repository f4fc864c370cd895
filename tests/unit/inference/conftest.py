"""The int8 predictor (quantized, then compiled on first call: slow), built once here."""

import pytest

from pt2aws.inference.predictor import Predictor


@pytest.fixture(scope="package")
def int8_predictor(smoke_model_dir):
    """The torchao int8 variant (quantized, then compiled on its first call)."""
    return Predictor(str(smoke_model_dir), variant="int8")
