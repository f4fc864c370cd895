"""A C++ compiler missing, as in the first serving image (issue 17: torch.compile failed at the
warm-up of int8 and took the server down); the fixture is ``no_compiler`` in
``tests/unit/inference/conftest.py``."""

NO_COMPILER = "torch.compile on a CPU needs a C++ compiler and none was found (test)"
