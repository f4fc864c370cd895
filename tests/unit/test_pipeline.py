import pytest

from pt2aws import pipeline


def test_make_run_data_options_become_notebook_01_parameters(tmp_path, monkeypatch):
    source = tmp_path / "reviews.tsv"
    source.write_text("5\tgreat\n1\tawful\n")
    monkeypatch.chdir(tmp_path)
    args = pipeline.build_parser().parse_args(
        ["--data", "reviews.tsv", "--header", "false", "--text-column", "1"]
        + ["--label-column", "0", "--label-map", "1=negative,5=positive", "--encoding", ""]
        + ["--max-length", "128"]
    )
    assert pipeline.data_parameters(args) == {
        "DATASET": str(source.resolve()),  # absolute: the notebooks run in notebooks/
        "HEADER": "false",
        "TEXT_COLUMN": "1",
        "LABEL_COLUMN": "0",
        "LABEL_MAP": "1=negative,5=positive",
        "MAX_LENGTH": "128",
    }
    defaults = pipeline.build_parser().parse_args([])
    assert pipeline.data_parameters(defaults) == {}  # make run with no DATA: the profile's data
    hub = pipeline.build_parser().parse_args(["--data", "stanfordnlp/sst2"])
    assert pipeline.data_parameters(hub) == {"DATASET": "stanfordnlp/sst2"}
    missing = pipeline.build_parser().parse_args(["--data", "nope.csv"])
    with pytest.raises(FileNotFoundError, match="DATA=nope.csv: no such file"):
        pipeline.data_parameters(missing)


def test_make_run_max_length_is_a_valid_notebook_01_value():
    from pt2aws.config import TrainConfig

    args = pipeline.build_parser().parse_args(["--max-length", "128"])
    value = pipeline.data_parameters(args)["MAX_LENGTH"]
    assert TrainConfig(profile="local", max_length=value).max_length == 128
    assert TrainConfig(profile="local", max_length="auto").max_length == "auto"
    with pytest.raises(ValueError, match="--max_length 'long'"):
        TrainConfig(profile="local", max_length="long")
