"""Tests of :mod:`pt2aws.inference.runtime`: the Graviton runtime settings."""

from __future__ import annotations

import os

import pytest
import torch

from pt2aws.env.machine import available_cpus
from pt2aws.inference.runtime import apply_runtime_settings, graviton_settings


@pytest.mark.parametrize(
    ("arm64", "bf16", "fast_math"), [(True, True, True), (True, False, False), (False, True, False)]
)
def test_fast_math_only_on_arm_with_bf16(arm64, bf16, fast_math):
    settings = graviton_settings(arm64=arm64, bf16=bf16, vcpus=8, processes=2)
    assert (settings["env"].get("DNNL_DEFAULT_FPMATH_MODE") == "BF16") is fast_math
    assert settings["env"]["LRU_CACHE_CAPACITY"] == "1024"
    assert settings["env"]["THP_MEM_ALLOC_ENABLE"] == "1"
    assert settings["threads"] == 4 and settings["env"]["OMP_NUM_THREADS"] == "4"
    assert set(settings["reasons"]) >= set(settings["env"])
    with pytest.raises(ValueError, match="must be >= 1"):
        graviton_settings(arm64=arm64, bf16=bf16, vcpus=0)


def test_apply_runtime_settings_keeps_preset_values(monkeypatch):
    monkeypatch.setattr(os, "environ", dict(os.environ))  # undone afterwards
    for name in ("LRU_CACHE_CAPACITY", "THP_MEM_ALLOC_ENABLE", "DNNL_DEFAULT_FPMATH_MODE"):
        os.environ.pop(name, None)
    os.environ["OMP_NUM_THREADS"] = "1"
    threads = torch.get_num_threads()
    try:
        record = apply_runtime_settings()
        assert record["env"]["OMP_NUM_THREADS"] == "1"  # kept
        assert record["env"]["LRU_CACHE_CAPACITY"] == os.environ["LRU_CACHE_CAPACITY"] == "1024"
        assert os.environ["THP_MEM_ALLOC_ENABLE"] == "1"
        assert record["torch_threads"] == 1
    finally:
        torch.set_num_threads(threads)


def test_the_server_sets_them_without_torch_threads(monkeypatch):
    monkeypatch.setattr(os, "environ", dict(os.environ))
    for name in ("LRU_CACHE_CAPACITY", "THP_MEM_ALLOC_ENABLE", "OMP_NUM_THREADS"):
        os.environ.pop(name, None)
    os.environ["LRU_CACHE_CAPACITY"] = "64"  # e.g. from CreateModel Environment
    record = apply_runtime_settings(1, torch_threads=False)  # before the workers start
    assert record["env"]["LRU_CACHE_CAPACITY"] == "64" and "torch_threads" not in record
    assert os.environ["THP_MEM_ALLOC_ENABLE"] == "1"
    assert os.environ["OMP_NUM_THREADS"] == str(available_cpus())
