"""Fixtures for the tests that deploy on the AWS emulator (``aws/``, ``standins/``, the CLI's
clean-up): a stub model server and an emulator forwarding ``InvokeEndpoint`` to it, one per
test module (moto keeps its state in the process, so each module checks it leaves nothing)."""

import pytest
from support.emulator import StubModelServer

from pt2aws.emulator.server import Emulator


@pytest.fixture(scope="module")
def stub():
    server = StubModelServer()
    yield server
    server.close()


@pytest.fixture(scope="module")
def emulator(stub):
    with Emulator(invocations_url=stub.url) as emu:
        yield emu
