import pytest

from pt2aws.config import PROFILES, TrainConfig, get_profile


def test_profiles_have_expected_models():
    assert get_profile("smoke").model_name_or_path == "tiny-roberta"
    assert get_profile("local").model_name_or_path == "minilm-l6"
    assert get_profile("full").model_name_or_path == "FacebookAI/roberta-base"
    assert set(PROFILES) == {"smoke", "local", "full"}


def test_unknown_profile_names_the_choices():
    with pytest.raises(ValueError, match="smoke, local, full"):
        get_profile("huge")


def test_train_config_takes_profile_defaults_and_keeps_overrides():
    cfg = TrainConfig(profile="local", learning_rate=1e-4)
    assert cfg.learning_rate == 1e-4
    assert cfg.max_length == "auto"  # local and full choose it from the data (issue 11)
    assert TrainConfig(profile="local", max_length="64").max_length == 64  # a CLI string
    assert TrainConfig(profile="smoke").max_length == 48  # smoke keeps a fixed length
    assert cfg.per_device_train_batch_size == 32


def test_data_options_are_checked_before_any_data_is_read():
    with pytest.raises(ValueError, match="--max_length 'long': use a number of tokens"):
        TrainConfig(max_length="long")
    with pytest.raises(ValueError, match="--header 'maybe': use auto, true or false"):
        TrainConfig(header="maybe")
    with pytest.raises(ValueError, match="--encoding 'klingon'"):
        TrainConfig(encoding="klingon")
    cfg = TrainConfig(header="false", encoding="cp1252", label_map="1=positive,-1=negative")
    assert (cfg.header, cfg.encoding) == ("false", "cp1252")


def test_train_config_rejects_bad_values():
    with pytest.raises(ValueError, match="gradient_accumulation_steps"):
        TrainConfig(gradient_accumulation_steps=0)


def test_train_config_round_trips_through_json_and_rejects_unknown_keys(tmp_path):
    import json

    cfg = TrainConfig(profile="smoke", max_steps=7, length_bucketing=True)
    path = cfg.to_json(tmp_path / "sub" / "train_config.json")
    assert TrainConfig.from_json(path) == cfg
    data = json.loads(path.read_text())
    assert data["max_length"] == 48 and data["checkpoint_dir"].endswith("checkpoints")
    path.write_text(json.dumps({**data, "max_stepz": 3}))
    with pytest.raises(ValueError, match=r"unknown TrainConfig fields \['max_stepz'\]"):
        TrainConfig.from_json(path)


def test_length_bucketing_defaults_to_the_profile_and_flags_override_it():
    assert TrainConfig(profile="local").length_bucketing is True  # measured 1.59x on CPU
    assert TrainConfig(profile="smoke").length_bucketing is False  # slower loss fall, tiny gain
    assert TrainConfig(profile="full").length_bucketing is False  # not measured on GPU
    assert TrainConfig(profile="local", length_bucketing=False).length_bucketing is False
    assert TrainConfig(profile="full", length_bucketing=True).length_bucketing is True


def test_reader_options_are_what_read_source_takes():
    import inspect

    from pt2aws.data import read_source

    cfg = TrainConfig(profile="smoke", dataset="x.tsv", header="false", text_column="1")
    options = cfg.reader_options()
    assert options == {
        "config_name": None,
        "text_column": "1",
        "label_column": "label",
        "header": "false",
        "encoding": "auto",
    }
    assert set(options) <= set(inspect.signature(read_source).parameters)
