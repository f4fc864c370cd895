"""Tests of :mod:`pt2aws.train.flags`: each flag's choice and its reason."""

import torch

from pt2aws.train.flags import (
    choose_bf16,
    choose_compile,
    choose_fused_adamw,
    choose_pad_to_multiple,
)


def test_flag_choices_on_cpu_have_reasons():
    cpu = torch.device("cpu")
    assert choose_bf16(cpu, "auto").enabled is False
    assert choose_bf16(cpu, "on").enabled is True
    assert choose_compile(cpu, "auto").enabled is False
    assert "compil" in choose_compile(cpu, "auto").reason
    assert choose_compile(cpu, "on").enabled is True
    fused = choose_fused_adamw(cpu, "auto")
    assert fused.enabled is True and "supports" in fused.reason
    assert choose_fused_adamw(cpu, "off").enabled is False
    # eager CPU pads each batch to its longest text; GPUs and compiled models to a multiple of 8
    assert choose_pad_to_multiple(cpu, compiled=False).enabled is False
    assert choose_pad_to_multiple(cpu, compiled=True).enabled is True
    assert choose_pad_to_multiple(torch.device("cuda"), compiled=False).enabled is True


def test_new_flags_on_cpu_and_bad_values_name_the_fix():
    import pytest

    from pt2aws.config import TrainConfig
    from pt2aws.train.flags import choose_fp16, choose_tf32

    cpu = torch.device("cpu")
    assert choose_tf32(cpu, "auto").enabled is False
    with pytest.raises(ValueError, match="Ampere"):
        choose_tf32(cpu, "on")
    assert choose_fp16(cpu, "auto", choose_bf16(cpu, "auto")).enabled is False
    with pytest.raises(ValueError, match="torch_compile_mode"):
        TrainConfig(torch_compile_mode="fastest")
    with pytest.raises(ValueError, match="--resume"):
        TrainConfig(resume="no/such/step-000001.pt")
    assert TrainConfig(output_dir="x/train").checkpoint_dir == "x/train/checkpoints"
