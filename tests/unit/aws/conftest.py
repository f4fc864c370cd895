"""The smoke model packaged and uploaded to the emulator's default bucket (one per test module)."""

import pytest

from pt2aws.aws import artifact, session


@pytest.fixture(scope="module")
def model_url(emulator, smoke_model_dir, tmp_path_factory):
    archive = artifact.package(smoke_model_dir, tmp_path_factory.mktemp("emu") / "model.tar.gz")
    return artifact.upload_archive(
        archive, session.default_bucket(emulator.region), "t/model.tar.gz", emulator.region
    )
