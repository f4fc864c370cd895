"""cpu_features: the kernel's view of the CPU, with the ISA caps honoured, on faked inputs."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from pt2aws import env
from pt2aws.env import cpu as cpu_mod
from pt2aws.env.cpu import features_from, hardware_from_auxv, hardware_from_torch

# /proc/cpuinfo flags
ZEN5 = "fpu avx2 fma avx512f avx512bw avx512vl avx512dq avx_vnni avx512_vnni avx512_bf16".split()
SAPPHIRE_RAPIDS = "avx2 avx512f avx512_vnni avx512_bf16 amx_bf16 amx_tile amx_int8".split()
ICE_LAKE = ["avx2", "avx512f", "avx512_vnni"]  # AVX-512 + VNNI, no bf16
# aarch64 auxiliary vectors: (AT_HWCAP, AT_HWCAP2) bits from Linux asm/hwcap.h
GRAVITON3 = (1 << 1 | 1 << 20 | 1 << 22, 1 << 12 | 1 << 13 | 1 << 14)  # asimd dp sve; bf16 i8mm
GRAVITON2 = (1 << 1 | 1 << 20, 0)  # Neoverse N1: asimd + dot product, no SVE, no bf16


def x86(flags: list[str], environ: dict | None = None):
    return features_from("x86_64", flags, environ=environ or {}, model="EPYC")


def test_avx2_cap_takes_bf16_and_vnni_from_a_cpu_that_has_them():
    native = x86(ZEN5)
    assert native.bf16_native and native.int8_dot and not native.amx
    assert native.isa == "AVX512" and native.bf16_native.reason == "EPYC has AVX512-BF16"
    capped = x86(ZEN5, {"ATEN_CPU_CAPABILITY": "avx2"})
    assert not capped.bf16_native and not capped.int8_dot
    assert capped.isa == "AVX2" and capped.caps == {"ATEN_CPU_CAPABILITY": "avx2"}
    assert "ATEN_CPU_CAPABILITY=avx2 caps torch at AVX2" in capped.bf16_native.reason
    assert "AVX-VNNI" in capped.int8_dot.reason  # the 256-bit VNNI goes too
    assert "set ONEDNN_MAX_CPU_ISA too" in capped.notes[0]  # oneDNN is still uncapped
    both = x86(ZEN5, {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2"})
    assert not both.bf16_native and not both.int8_dot and both.notes == []
    assert "no native bf16" in both.description and "capped by" in both.description


@pytest.mark.parametrize(
    ("onednn", "bf16", "int8", "amx"),
    [
        ("AVX512_CORE_AMX", True, True, True),
        ("AVX512_CORE_BF16", True, True, False),
        ("avx512_core_vnni", False, True, False),  # an AVX-512 CPU without bf16 (Cascade Lake)
        ("AVX512_CORE", False, False, False),
        ("AVX2_VNNI", False, False, False),  # Sapphire Rapids lists no avx_vnni here
        ("ALL", True, True, True),
    ],
)
def test_onednn_cap_orders_bf16_vnni_and_amx(onednn, bf16, int8, amx):
    f = x86(SAPPHIRE_RAPIDS, {"ONEDNN_MAX_CPU_ISA": onednn})
    assert (f.bf16_native.available, f.int8_dot.available, f.amx.available) == (bf16, int8, amx)
    if not bf16:
        assert f"ONEDNN_MAX_CPU_ISA={onednn.upper()} caps oneDNN" in f.bf16_native.reason


def test_avx_vnni_survives_only_where_onednn_is_told_so():
    caps = {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2_VNNI"}
    alder = x86(ZEN5, caps)  # emulates an AVX2 + AVX-VNNI client CPU
    assert alder.int8_dot and not alder.bf16_native
    assert alder.int8_dot.reason == "EPYC has AVX-VNNI"
    assert x86(ICE_LAKE).int8_dot and not x86(ICE_LAKE).bf16_native
    assert "has no AVX512-BF16 or AMX-BF16" in x86(ICE_LAKE).bf16_native.reason


def test_unknown_onednn_value_is_ignored_with_a_note():
    f = x86(ZEN5, {"ONEDNN_MAX_CPU_ISA": "AVX3"})
    assert f.bf16_native and "not a oneDNN ISA name" in f.notes[0]


def test_arm_features_come_from_hwcap_bits():
    assert hardware_from_auxv(*GRAVITON3) == {"asimd", "asimddp", "sve", "svebf16", "i8mm", "bf16"}
    g3 = features_from("aarch64", hardware_from_auxv(*GRAVITON3), environ={}, model="G3")
    assert g3.bf16_native and g3.sve and not g3.amx
    assert g3.int8_dot.reason == "G3 has SDOT/UDOT and I8MM" and g3.isa == "SVE256"
    g2 = features_from("aarch64", hardware_from_auxv(*GRAVITON2), environ={}, model="G2")
    assert not g2.bf16_native and g2.int8_dot and not g2.sve
    assert "no BF16 (HWCAP2_BF16)" in g2.bf16_native.reason
    plain = features_from("aarch64", hardware_from_auxv(1 << 1, 0), environ={}, model="A72")
    assert not plain.int8_dot and "no SDOT/UDOT" in plain.int8_dot.reason
    capped = features_from(
        "aarch64", hardware_from_auxv(*GRAVITON3), environ={"ATEN_CPU_CAPABILITY": "default"}
    )
    assert not capped.sve and capped.bf16_native and "caps it away" in capped.sve.reason


def test_torch_capability_names_map_to_the_kernels():
    caps = {"avx512_f": True, "avx512_bf16": True, "avx_vnni": False, "dot": True, "sve": 1}
    assert hardware_from_torch(caps) == {"avx512f", "avx512_bf16", "asimddp"}


def test_emulated_arm64_ignores_the_hosts_cpuinfo(tmp_path, monkeypatch):
    """Under QEMU user mode /proc/cpuinfo is the x86 host's: the auxiliary vector decides."""
    (tmp_path / "proc").mkdir()
    host = "processor\t: 0\nmodel name\t: AMD EPYC\nflags\t\t: " + " ".join(ZEN5) + "\n"
    (tmp_path / "proc" / "cpuinfo").write_text(host)
    g3 = features_from("aarch64", hardware_from_auxv(*GRAVITON3), environ={}, model="aarch64")
    assert env.cpu_info(g3, tmp_path, machine="aarch64")["cpu_part"] is None

    monkeypatch.setattr(cpu_mod.platform, "machine", lambda: "aarch64")
    monkeypatch.setattr(cpu_mod.platform, "system", lambda: "Linux")
    monkeypatch.setattr(cpu_mod, "_auxv", lambda: GRAVITON3)
    for name in cpu_mod.CAP_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    cpu_mod._probe.cache_clear()
    try:
        probed = cpu_mod.cpu_features()
    finally:
        cpu_mod._probe.cache_clear()
    assert probed.source.startswith("getauxval") and probed.bf16_native and probed.sve
    assert probed.model == "aarch64"  # cpu_name ignores the x86 host's /proc/cpuinfo


def test_bf16_int8_and_runtime_decisions_follow_cpu_features(monkeypatch):
    import torch

    from pt2aws.inference.runtime import apply_runtime_settings
    from pt2aws.inference.variants import runnable_variants
    from pt2aws.train.flags import choose_bf16

    avx2 = x86(ZEN5, {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2"})
    monkeypatch.setattr(env, "cpu_features", lambda: avx2)
    runnable, left_out = runnable_variants(["eager", "bf16", "int8"])
    assert runnable == ["eager"] and "caps torch at AVX2" in left_out["bf16"]
    assert "EPYC has AVX512-BF16" in left_out["bf16"] and "no int8 dot products" in left_out["int8"]
    choice = choose_bf16(torch.device("cpu"), "auto")
    assert not choice.enabled and "without native bf16" in choice.reason

    g3 = features_from("aarch64", hardware_from_auxv(*GRAVITON3), environ={}, model="G3")
    monkeypatch.setattr(env, "cpu_features", lambda: g3)
    monkeypatch.setattr(os, "environ", {})  # what it sets is undone afterwards
    assert apply_runtime_settings(torch_threads=False)["env"]["DNNL_DEFAULT_FPMATH_MODE"] == "BF16"
    g2 = features_from("aarch64", hardware_from_auxv(*GRAVITON2), environ={}, model="G2")
    monkeypatch.setattr(env, "cpu_features", lambda: g2)
    monkeypatch.setattr(os, "environ", {})
    assert "DNNL_DEFAULT_FPMATH_MODE" not in apply_runtime_settings(torch_threads=False)["env"]


def test_caps_reach_torch_in_a_fresh_process():
    """ATen reports the capped ISA and oneDNN drops bf16: what the caps emulate is real."""
    code = (
        "import json, torch; from pt2aws.env import cpu_features; f = cpu_features(); "
        "print(json.dumps([f.isa, f.bf16_native.available, f.int8_dot.available, "
        "torch.ops.mkldnn._is_mkldnn_bf16_supported()]))"
    )
    environ = dict(os.environ, ATEN_CPU_CAPABILITY="avx2", ONEDNN_MAX_CPU_ISA="AVX2")
    out = subprocess.run(
        [sys.executable, "-c", code], env=environ, capture_output=True, text=True, check=True
    )
    isa, bf16, int8, onednn_bf16 = json.loads(out.stdout.strip().splitlines()[-1])
    if os.uname().machine == "x86_64":
        assert isa == "AVX2"
    assert (bf16, int8, onednn_bf16) == (False, False, False)


def test_a_capped_instruction_set_gets_its_own_compile_cache(tmp_path):
    capped = {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2", "HOME": "/root"}
    folder = cpu_mod.inductor_cache_for_caps(capped)
    assert folder is not None and capped["TORCHINDUCTOR_CACHE_DIR"] == folder
    assert folder.endswith("_aten_cpu_capability_avx2_onednn_max_cpu_isa_avx2")
    other = cpu_mod.inductor_cache_for_caps({"ATEN_CPU_CAPABILITY": "default"})
    assert other != folder  # each cap its own folder
    chosen = {"ATEN_CPU_CAPABILITY": "avx2", "TORCHINDUCTOR_CACHE_DIR": str(tmp_path)}
    assert cpu_mod.inductor_cache_for_caps(chosen) is None  # the user's choice stays
    assert chosen["TORCHINDUCTOR_CACHE_DIR"] == str(tmp_path)
    plain = {"PATH": "/usr/bin"}
    assert cpu_mod.inductor_cache_for_caps(plain) is None and "TORCHINDUCTOR_CACHE_DIR" not in plain


def test_import_pt2aws_sets_the_capped_cache_in_a_fresh_process_and_stays_cheap():
    import subprocess

    env = {k: v for k, v in os.environ.items() if k != "TORCHINDUCTOR_CACHE_DIR"}
    code = (
        "import os, sys, pt2aws, pt2aws.errors, pt2aws.config, pt2aws.rundir\n"
        "heavy = [m for m in ('torch', 'boto3', 'sagemaker', 'transformers') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
        "print(os.environ.get('TORCHINDUCTOR_CACHE_DIR'))"
    )
    capped = subprocess.run(
        [sys.executable, "-c", code],
        env={**env, "ATEN_CPU_CAPABILITY": "avx2"},
        capture_output=True,
        text=True,
        check=True,
    )
    assert capped.stdout.strip().endswith("_aten_cpu_capability_avx2")
    env.pop("ATEN_CPU_CAPABILITY", None)
    env.pop("ONEDNN_MAX_CPU_ISA", None)
    plain = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert plain.stdout.strip() == "None"
