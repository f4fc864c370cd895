"""Tests of :mod:`pt2aws.env.probes`: CPU, EFA and platform detection."""

from __future__ import annotations

import os

from pt2aws.env import probes
from pt2aws.env.cpu import features_from

GRAVITON3 = """processor\t: 0
BogoMIPS\t: 2100.00
Features\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm jscvt fcma lrcpc dcpop sha3 sm3 sm4 asimddp sha512 sve asimdfhm dit uscat ilrcpc flagm ssbs paca pacg dcpodp svei8mm svebf16 i8mm bf16 dgh rng
CPU implementer\t: 0x41
CPU part\t: 0xd40

processor\t: 1
Features\t: fp asimd sve bf16
CPU part\t: 0xd40
"""


SAPPHIRE_RAPIDS = """processor\t: 0
model name\t: Intel(R) Xeon(R) Platinum 8488C
physical id\t: 0
core id\t: 0
flags\t\t: fpu avx512f avx512_bf16 amx_bf16 amx_tile amx_int8
processor\t: 1
model name\t: Intel(R) Xeon(R) Platinum 8488C
physical id\t: 0
core id\t: 0
flags\t\t: fpu avx512f avx512_bf16 amx_bf16 amx_tile amx_int8
"""


def _root(tmp_path, cpuinfo):
    (tmp_path / "proc").mkdir(parents=True)
    (tmp_path / "proc" / "cpuinfo").write_text(cpuinfo)
    return tmp_path


def test_cpu_info_graviton3_and_sapphire_rapids(tmp_path):
    g3 = features_from("aarch64", ["bf16", "sve"], environ={})
    g = probes.cpu_info(g3, _root(tmp_path / "g", GRAVITON3), machine="aarch64")
    assert g["cpu_part"] == "0xd40" and g["logical_cores"] == g["physical_cores"] == 2
    assert g["features"]["bf16_native"]["available"] is True
    spr = features_from("x86_64", ["avx512f", "avx512_bf16"], environ={})
    x = probes.cpu_info(spr, _root(tmp_path / "x", SAPPHIRE_RAPIDS), machine="x86_64")
    assert x["cpu_part"] is None
    assert x["logical_cores"] == 2 and x["physical_cores"] == 1  # hyper-threads of one core
    assert probes.cpu_info(spr, tmp_path / "none", machine="x86_64")["cpu_part"] is None


def test_efa_and_platform_detection(tmp_path):
    ib = tmp_path / "sys" / "class" / "infiniband" / "rdmap16s27" / "device"
    ib.mkdir(parents=True)
    (tmp_path / "drivers" / "efa").mkdir(parents=True)
    os.symlink(tmp_path / "drivers" / "efa", ib / "driver")
    assert probes.efa_info(tmp_path) == {"present": True, "devices": ["rdmap16s27"]}
    assert probes.efa_info(tmp_path / "nothing") == {"present": False, "devices": []}

    meta = tmp_path / "opt" / "ml" / "metadata"
    meta.mkdir(parents=True)
    (meta / "resource-metadata.json").write_text('{"DomainId": "d-123", "SpaceName": "s"}')
    (tmp_path / "opt" / "dlami").mkdir()
    where = probes.platform_info(tmp_path, {"DLC_CONTAINER_TYPE": "training"})
    assert where["sagemaker"] == "studio" and where["dlc"] == "training" and where["dlami"]
    assert "SageMaker Studio" in where["summary"] and "Deep Learning Container" in where["summary"]
    job = probes.platform_info(tmp_path / "nothing", {"TRAINING_JOB_NAME": "j"})
    assert job["sagemaker"] == "training-job" and not job["dlami"]
    plain = probes.platform_info(tmp_path / "nothing", {})
    assert plain["summary"].startswith("not a DLAMI")
