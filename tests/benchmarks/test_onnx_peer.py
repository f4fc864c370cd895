"""ONNX Runtime, the peer of ``benchmarks/inference_speed.py`` (``benchmarks/peers/onnx_peer.py``)."""

import pytest
from support.texts import TEXTS

from pt2aws.inference.predictor import Predictor


def test_onnx_runtime_rows_build_and_agree(smoke_model_dir, tmp_path, eager_probs):
    pytest.importorskip("onnxruntime", reason="onnxruntime is pinned in pyproject.toml")
    from peers import onnx_peer

    from pt2aws.inference.measure import compare_predictors

    fp32 = onnx_peer.export_onnx(smoke_model_dir, tmp_path / "model.onnx")
    int8 = onnx_peer.quantize_onnx_int8(fp32, tmp_path / "model-int8.onnx")
    ort_fp32 = onnx_peer.OrtPredictor(fp32, smoke_model_dir)
    probs = ort_fp32.predict_proba(TEXTS)
    assert probs.shape == tuple(eager_probs.shape)
    assert abs(probs - eager_probs.numpy()).max() < 1e-4  # the same fp32 model
    predictors = {
        "eager": Predictor(str(smoke_model_dir), batch_size=5),
        "ort-fp32": ort_fp32,
        "ort-int8": onnx_peer.OrtPredictor(int8, smoke_model_dir),
    }
    rows = compare_predictors(predictors, TEXTS, latency_calls=2, repeats=1)
    assert [r["variant"] for r in rows] == ["eager", "ort-fp32", "ort-int8"]
    assert rows[1]["agreement"] == 1.0 and 0.9 <= rows[2]["agreement"] <= 1.0
    assert all(r["samples_per_s"] > 0 and r["calls"] == 2 for r in rows)
    assert predictors["eager"].batch_size == 5  # timed at batch 32, then restored
