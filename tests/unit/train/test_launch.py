import json
import shlex
import sys

import pytest

from pt2aws.config import TrainConfig
from pt2aws.train.launch import (
    config_to_args,
    format_command,
    launch_training,
    torchrun_command,
)
from pt2aws.train.loop import parse_args


def test_config_to_args_skips_none_and_lowers_bools():
    assert config_to_args(profile="smoke", max_steps=3, three_class=True, dataset=None) == [
        "--profile",
        "smoke",
        "--max_steps",
        "3",
        "--three_class",
        "true",
    ]


def test_torchrun_command_uses_this_interpreter():
    cmd = torchrun_command(["--profile", "smoke"], nproc_per_node=2)
    assert cmd[:3] == [sys.executable, "-m", "torch.distributed.run"]
    assert "--nproc_per_node=2" in cmd and "--standalone" in cmd
    assert cmd[cmd.index("-m", 3) :] == ["-m", "pt2aws.train", "--profile", "smoke"]


def test_format_command_is_one_pasteable_line():
    cmd = torchrun_command(["--config", "my runs/train_config.json"], nproc_per_node=1)
    line = format_command(cmd)
    assert "\n" not in line and "'my runs/train_config.json'" in line
    assert shlex.split(line) == cmd


def test_config_file_round_trips_and_later_flags_override_it(tmp_path):
    cfg = TrainConfig(profile="smoke", output_dir=str(tmp_path / "a"), max_steps=7, seed=3)
    path = cfg.to_json(tmp_path / "train_config.json")
    assert parse_args(["--config", str(path)]) == cfg
    over = parse_args(["--config", str(path), "--max_steps", "9", "--output_dir", "b"])
    assert over.max_steps == 9 and over.seed == 3 and over.max_length == 48
    assert over.output_dir == "b" and over.checkpoint_dir == "b/checkpoints"  # derived follows
    assert parse_args(["--max_steps", "9", "--config", str(path)]).max_steps == 9  # any order
    assert parse_args(["--profile", "smoke", "--max_steps", "7"]).max_steps == 7  # flags alone
    path.write_text(json.dumps({**cfg.to_dict(), "max_stepz": 1}))
    with pytest.raises(ValueError, match="max_stepz"):
        parse_args(["--config", str(path)])


def test_launch_training_one_process_under_torchrun(tmp_path):
    import io

    out = io.StringIO()
    cfg = TrainConfig(
        output_dir=str(tmp_path / "train"),
        profile="smoke",
        max_steps=4,
        max_train_samples=200,
        max_eval_samples=40,
        logging_steps=2,
    )
    metrics = launch_training(cfg, nproc_per_node=1, stream=out)
    assert metrics["train_steps"] == 4
    assert metrics["world_size"] == 1
    printed = out.getvalue()
    assert "fused_adamw: on" in printed
    assert f"-m pt2aws.train --config {tmp_path / 'train' / 'train_config.json'}" in printed
    assert json.loads((tmp_path / "train" / "metrics.json").read_text())["train_steps"] == 4
    assert TrainConfig.from_json(tmp_path / "train" / "train_config.json") == cfg
