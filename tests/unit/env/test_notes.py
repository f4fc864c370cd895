"""Tests of :mod:`pt2aws.env.notes`: problems come with fixes."""

from __future__ import annotations

from pt2aws import env


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
