"""Tests of :mod:`pt2aws.env`: the environment report, its probes and its problems."""

from __future__ import annotations

import json
import os

from pt2aws import env
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


def test_collect_on_this_machine_says_cpu_only_or_lists_gpus(tmp_path):
    report = env.collect("local", disk_path=tmp_path / "run")
    for key in ("versions", "cpu", "gpus", "disk", "efa", "where", "notes"):
        assert key in report
    assert {"cudnn", "nccl", "sagemaker"} <= set(report["versions"])
    assert report["disk"]["free_bytes"] > 0
    text = env.format_report(report)
    if not report["gpus"]:
        assert "CPU-only machine" in text and report["accelerator"] == "cpu"
    else:
        assert f"GPU {len(report['gpus']) - 1}:" in text


def test_env_report_on_cpu_machine():
    report = env.collect("full")
    assert report["versions"]["torch"].startswith("2.13.0")
    assert report["arch"]
    assert report["cpu"]["logical_cores"] >= 1
    json.dumps(report)  # serialisable
    if not report["gpus"]:
        assert report["accelerator"] == "cpu"
        assert any("no CUDA GPU" in n for n in report["notes"])
        assert any("profile full needs a GPU" in n for n in report["notes"])
    text = env.format_report(report)
    assert "profile full" in text
    report["cpu"]["processor"] = ("Graviton3", "Neoverse V1")  # what a Graviton3's cpu_info has
    assert (
        f"CPU: {report['cpu']['features']['model']}, Graviton3 (Neoverse V1),"
        in env.format_report(report)
    )


def test_cpu_info_graviton3_and_sapphire_rapids(tmp_path):
    g3 = features_from("aarch64", ["bf16", "sve"], environ={})
    g = env.cpu_info(g3, _root(tmp_path / "g", GRAVITON3), machine="aarch64")
    assert g["cpu_part"] == "0xd40" and g["logical_cores"] == g["physical_cores"] == 2
    assert g["processor"] == ("Graviton3", "Neoverse V1")
    assert g["features"]["bf16_native"]["available"] is True
    spr = features_from("x86_64", ["avx512f", "avx512_bf16"], environ={})
    x = env.cpu_info(spr, _root(tmp_path / "x", SAPPHIRE_RAPIDS), machine="x86_64")
    assert x["cpu_part"] is None and x["processor"] is None
    assert x["logical_cores"] == 2 and x["physical_cores"] == 1  # hyper-threads of one core
    assert env.cpu_info(spr, tmp_path / "none", machine="x86_64")["cpu_part"] is None


def test_efa_and_platform_detection(tmp_path):
    ib = tmp_path / "sys" / "class" / "infiniband" / "rdmap16s27" / "device"
    ib.mkdir(parents=True)
    (tmp_path / "drivers" / "efa").mkdir(parents=True)
    os.symlink(tmp_path / "drivers" / "efa", ib / "driver")
    assert env.efa_info(tmp_path) == {"present": True, "devices": ["rdmap16s27"]}
    assert env.efa_info(tmp_path / "nothing") == {"present": False, "devices": []}

    meta = tmp_path / "opt" / "ml" / "metadata"
    meta.mkdir(parents=True)
    (meta / "resource-metadata.json").write_text('{"DomainId": "d-123", "SpaceName": "s"}')
    (tmp_path / "opt" / "dlami").mkdir()
    where = env.platform_info(tmp_path, {"DLC_CONTAINER_TYPE": "training"})
    assert where["sagemaker"] == "studio" and where["dlc"] == "training" and where["dlami"]
    assert "SageMaker Studio" in where["summary"] and "Deep Learning Container" in where["summary"]
    job = env.platform_info(tmp_path / "nothing", {"TRAINING_JOB_NAME": "j"})
    assert job["sagemaker"] == "training-job" and not job["dlami"]
    plain = env.platform_info(tmp_path / "nothing", {})
    assert plain["summary"].startswith("not a DLAMI")


def test_problems_come_with_fixes(tmp_path):
    gpu = {
        "index": 0,
        "name": "Tesla T4",
        "memory_bytes": 16 * 2**30,
        "compute_capability": "7.5",
        "bf16": False,
        "peers": [],
        "nvlink": False,
    }
    report = {
        "profile": "full",
        "gpus": [dict(gpu, index=i) for i in range(8)],
        "cpu": {"features": {"bf16_native": {"available": False, "reason": "G2 has no BF16"}}},
        "versions": {"cuda": "12.8", "sagemaker": None},
        "memory_bytes": 4 * 2**30,
        "disk": {"path": "/x", "free_bytes": 2**30, "total_bytes": 8 * 2**30},
        "efa": {"present": False, "devices": []},
    }
    notes = "\n".join(env.problems(report, root=tmp_path))
    assert "without bf16" in notes and "fp32" in notes
    assert "peer-to-peer" in notes and "no NVLink" in notes and "no EFA" in notes
    assert (
        "no native bf16 (G2 has no BF16)" in notes
        and "4.0 GiB of RAM" in notes
        and "1.0 GiB free" in notes
    )
    assert "pip install sagemaker==3.27.0" in notes
