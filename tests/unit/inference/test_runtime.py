"""Tests of :mod:`pt2aws.inference.runtime`: the Graviton runtime settings."""

from __future__ import annotations

import os

import pytest
import torch

from pt2aws.env.machine import available_cpus
from pt2aws.inference.runtime import set_runtime_environment


@pytest.mark.parametrize(
    ("machine", "bf16", "fast_math"),
    [("aarch64", True, True), ("aarch64", False, False), ("x86_64", True, False)],
)
def test_runtime_settings_fast_math_only_on_arm_with_bf16(monkeypatch, machine, bf16, fast_math):
    import platform

    from pt2aws.inference.runtime import runtime_settings

    monkeypatch.setattr(platform, "machine", lambda: machine)
    cpu = {"bf16": bf16, "graviton": machine == "aarch64"}
    settings = runtime_settings(num_processes=2, cpu=cpu)
    assert (settings["env"].get("DNNL_DEFAULT_FPMATH_MODE") == "BF16") is fast_math
    assert settings["env"]["LRU_CACHE_CAPACITY"] == "1024"
    assert settings["env"]["THP_MEM_ALLOC_ENABLE"] == "1"
    vcpus = len(os.sched_getaffinity(0))
    assert settings["threads"] == max(1, vcpus // 2)
    assert set(settings["reasons"]) >= set(settings["env"])


def test_apply_runtime_settings_keeps_preset_values(monkeypatch):
    from pt2aws.inference.runtime import apply_runtime_settings

    for name in ("LRU_CACHE_CAPACITY", "THP_MEM_ALLOC_ENABLE", "DNNL_DEFAULT_FPMATH_MODE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    threads = torch.get_num_threads()
    try:
        record = apply_runtime_settings()
        assert record["kept"] == {"OMP_NUM_THREADS": "1"}
        assert record["applied"]["LRU_CACHE_CAPACITY"] == "1024"
        assert os.environ["THP_MEM_ALLOC_ENABLE"] == "1"
        assert record["torch_threads"] == 1
    finally:
        torch.set_num_threads(threads)


def test_runtime_settings_keep_what_the_environment_sets(monkeypatch):
    for name in ("LRU_CACHE_CAPACITY", "THP_MEM_ALLOC_ENABLE", "OMP_NUM_THREADS"):
        monkeypatch.setenv(name, "x")  # recorded, so the values set below are undone afterwards
        monkeypatch.delenv(name)
    monkeypatch.setenv("LRU_CACHE_CAPACITY", "64")  # e.g. from CreateModel Environment
    record = set_runtime_environment(1)  # what the server runs before its workers start
    applied = {name: os.environ[name] for name in record["env"]}
    assert record["kept"] == {"LRU_CACHE_CAPACITY": "64"} and "torch_threads" not in record
    assert applied["LRU_CACHE_CAPACITY"] == "64"
    assert applied["THP_MEM_ALLOC_ENABLE"] == "1"
    assert applied["OMP_NUM_THREADS"] == str(available_cpus())
