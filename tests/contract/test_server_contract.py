"""One handler, two servers: every contract case answered alike by TorchServe and the project's
Starlette/uvicorn server (see ``contract_cases`` for how answers are compared)."""

from __future__ import annotations

import pytest
from contract_cases import CASES, assert_correct, assert_same_answer, request, send

pytestmark = pytest.mark.serve  # the reference needs Java


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_server_answers_as_torchserve(case, torchserve, asgi_server):
    reference = request(torchserve.port, case)
    got = request(asgi_server.port, case)
    assert_correct(case, reference)
    assert_correct(case, got)
    assert_same_answer(case, reference, got)
    if case.same_as is not None:  # a client's spelling of a request gets the clean one's answer
        clean = send(asgi_server.port, "POST", case.path, *case.same_as, case.accept)
        assert clean.status == 200 and got.body == clean.body
