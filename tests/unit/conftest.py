"""Fixtures for the tests that deploy on the AWS emulator (``aws/``, the CLI's clean-up): a stub
model server answering every emulated endpoint, one emulator per test module (moto keeps its
state in the process, so each module checks it leaves nothing)."""

import pytest
from support.emulator import StubModelServer, served_by

from pt2aws.emulator.server import Emulator


@pytest.fixture(scope="module")
def stub():
    server = StubModelServer()
    yield server
    server.close()


@pytest.fixture(scope="module")
def emulator(stub):
    with Emulator() as emu:
        emu.endpoints.server = served_by(stub.url)
        yield emu
