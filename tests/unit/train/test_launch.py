"""Launching training under torchrun from a config file, and parsing flags and config files."""

import io
import json
import shlex
import sys

import pytest

from pt2aws.config import TrainConfig
from pt2aws.train.launch import config_to_args
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


def test_launch_training_runs_torchrun_with_this_interpreter(tmp_path, monkeypatch):
    from pt2aws.train import launch

    def child(cmd, on_line, **kwargs):
        on_line("a line of the child\n")
        (tmp_path / "metrics.json").write_text(json.dumps({"cmd": cmd, **kwargs}))

    monkeypatch.setattr(launch, "stream_child", child)
    cfg, out = TrainConfig(profile="smoke", output_dir=str(tmp_path)), io.StringIO()
    cmd = launch.launch_training(cfg, nproc_per_node=2, max_restarts=1, stream=out)["cmd"]
    assert cmd[:3] == [sys.executable, "-m", "torch.distributed.run"]
    assert {"--nproc_per_node=2", "--standalone", "--max-restarts=1"} <= set(cmd)
    assert cmd[cmd.index("-m", 3) :] == [
        "-m",
        "pt2aws.train",
        "--config",
        f"{tmp_path}/train_config.json",
    ]
    assert out.getvalue() == f"$ {shlex.join(cmd)}\na line of the child\n"


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
    with pytest.raises(FileNotFoundError, match="train_config.json"):
        parse_args(["--config", str(tmp_path / "missing.json")])


def test_launch_training_prints_a_pasteable_command_flags_and_one_bar(two_process_run):
    cfg, metrics, printed = two_process_run
    command = printed.splitlines()[0]
    assert command.startswith("$ ") and shlex.split(command[2:])[-2:] == [
        "--config",
        f"{cfg.output_dir}/train_config.json",
    ]
    assert "--max-restarts=1" in command and "--nproc_per_node=2" in command
    assert "fused_adamw: on (requested)" in printed and "bf16: off (requested)" in printed
    assert "@pt2aws-progress" not in printed and "\x1b[" not in printed
    # one bar over both attempts (the restart resumes it at step 3), one summary line at the end
    lines = printed.split("\n")  # the bar redraws in place with carriage returns
    assert [line for line in lines if line.startswith("train: 6/6 steps in ")] == [lines[-2]]
    assert "resumed from " in printed and "/checkpoints/step-000003 (step 3, epoch 1)" in printed
    assert metrics["train_steps"] == 6
    assert TrainConfig.from_json(f"{cfg.output_dir}/train_config.json") == cfg
