"""Tests of :mod:`pt2aws.aws.session`."""

import pytest

from pt2aws.aws import session


def test_resource_name_is_timestamped_and_valid():
    name = session.resource_name("pt2aws-smoke")
    assert name.startswith("pt2aws-smoke-20") and len(name) == len("pt2aws-smoke-") + 15
    with pytest.raises(ValueError, match="letters, digits and single hyphens"):
        session.resource_name("my_model")
