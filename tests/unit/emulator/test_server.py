"""Tests of :mod:`pt2aws.emulator.server` (and the moto patches it applies)."""

import pytest
from botocore.exceptions import ClientError

from pt2aws.emulator import patches as moto_patches
from pt2aws.emulator.server import Emulator


def test_emulator_validates_instance_types_like_aws(emulator):
    sm = emulator.session().client("sagemaker")
    with pytest.raises(ClientError, match="instanceType"):
        sm.create_endpoint_config(
            EndpointConfigName="pt2aws-bad",
            ProductionVariants=[
                {"VariantName": "v", "ModelName": "m", "InstanceType": "ml.c99g.xlarge"}
            ],
        )
    with pytest.raises(ValueError, match="cannot inject a fault into 'DeleteModel'"):
        moto_patches.add_fault("DeleteModel")


def test_emulator_restores_environment():
    import os

    before = os.environ.get("AWS_ENDPOINT_URL")
    with Emulator() as emu:
        assert os.environ["AWS_ENDPOINT_URL"] == emu.url
    assert os.environ.get("AWS_ENDPOINT_URL") == before


def test_local_model_server_retries_a_failed_start(monkeypatch, tmp_path):
    from pt2aws.emulator.endpoints import local_model_server
    from pt2aws.standins import torchserve as local

    started, stopped = [], []

    class FlakyEndpoint:
        def __init__(self, model, workdir, env=None):
            self.workdir = workdir

        def start(self):
            started.append(self.workdir)
            if len(started) == 1:
                raise local.LocalEndpointError("Failed to bind: Address already in use")
            return self

        def stop(self):
            stopped.append(self.workdir)

    monkeypatch.setattr(local, "LocalEndpoint", FlakyEndpoint)
    with local_model_server("m.tar.gz", tmp_path / "serve") as server:
        assert server.workdir == tmp_path / "serve-retry2"
    assert started == [tmp_path / "serve", tmp_path / "serve-retry2"]
    assert stopped == [tmp_path / "serve-retry2"]
    started.clear()
    monkeypatch.setattr(
        FlakyEndpoint, "start", lambda self: (_ for _ in ()).throw(local.LocalEndpointError("no"))
    )
    with pytest.raises(local.LocalEndpointError, match="no"):
        with local_model_server("m.tar.gz", tmp_path / "s", attempts=2):
            pass
