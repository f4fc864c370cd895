import json
import sys

from pt2aws.train.launch import config_to_args, launch_training, torchrun_command


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


def test_launch_training_one_process_under_torchrun(tmp_path):
    import io

    out = io.StringIO()
    metrics = launch_training(
        tmp_path / "train",
        nproc_per_node=1,
        stream=out,
        profile="smoke",
        max_steps=4,
        max_train_samples=200,
        max_eval_samples=40,
        logging_steps=2,
    )
    assert metrics["train_steps"] == 4
    assert metrics["world_size"] == 1
    assert "fused_adamw: on" in out.getvalue()
    assert json.loads((tmp_path / "train" / "metrics.json").read_text())["train_steps"] == 4
