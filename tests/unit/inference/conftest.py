"""The int8 predictor (quantized, then compiled on first call: slow), built once here; a machine
without a C++ compiler (``no_compiler``)."""

import pytest
from support.compiler import NO_COMPILER

from pt2aws.inference import variants
from pt2aws.inference.predictor import Predictor


@pytest.fixture(scope="package")
def int8_predictor(smoke_model_dir):
    """The torchao int8 variant (quantized, then compiled on its first call)."""
    return Predictor(str(smoke_model_dir), variant="int8")


@pytest.fixture
def no_compiler(monkeypatch):
    """This machine as the image was: no C++ compiler for Inductor."""
    monkeypatch.setattr(variants, "compiler_missing", lambda: NO_COMPILER)
