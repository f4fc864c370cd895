"""The smoke model packaged and uploaded to the emulator's default bucket (one per test module)."""

import pytest

from pt2aws.aws import artifact, session


@pytest.fixture(scope="module")
def model_url(emulator, smoke_model_dir, tmp_path_factory):
    archive = artifact.package(smoke_model_dir, tmp_path_factory.mktemp("emu") / "model.tar.gz")
    on = emulator.session()
    return artifact.upload_archive(on, archive, f"s3://{session.default_bucket(on)}/t/model.tar.gz")
