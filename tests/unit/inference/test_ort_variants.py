"""ONNX Runtime as a servable variant (issue 17): exported at packaging, recorded, served."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tarfile

import pytest
from support.texts import TEXTS

from pt2aws.inference import ort
from pt2aws.inference.variants import load_fp32


@pytest.fixture(scope="module")
def exported(smoke_model_dir, tmp_path_factory):
    """A copy of the smoke model with its ONNX Runtime files exported (about 10 s)."""
    model_dir = tmp_path_factory.mktemp("ort") / "model"
    shutil.copytree(smoke_model_dir, model_dir)
    model, tokenizer = load_fp32(str(model_dir))
    files = ort.onnx_files(model_dir, model, tokenizer)
    return model_dir, files


def test_export_writes_fp32_and_int8_with_a_record(exported):
    import onnx

    model_dir, files = exported
    assert files == {
        "ort-fp32": model_dir / "onnx" / "model.onnx",
        "ort-int8": model_dir / "onnx" / "model_int8.onnx",
    }
    record = json.loads((model_dir / "onnx" / "export.json").read_text())
    assert record["weights_sha256"] == ort.weights_digest(model_dir)
    int8 = record["int8"]  # exported without validation texts: the default, unmeasured
    assert (int8["settings"], int8["why"], int8["measured"]) == (
        "int8 weights",
        "not measured (no texts)",
        {},
    )
    assert record["opset"] == ort.OPSET and "dynamo=False" in record["exporter"]
    assert "SkipLayerNormalization" in record["fused"]  # the transformer optimizer ran
    # the classifier head stays fp32; every encoder matmul with a weight is int8
    head = record["int8"]["fp32_nodes"]
    assert head and all("classifier" in name for name in head)
    ops = [(n.name, n.op_type) for n in onnx.load(str(files["ort-int8"])).graph.node]
    assert sum(op == "MatMulInteger" for _, op in ops) >= 2 * 6  # 2 layers, 6+ each
    assert all(op != "MatMulInteger" for name, op in ops if "classifier" in name)
    assert files["ort-int8"].stat().st_size < 0.6 * files["ort-fp32"].stat().st_size


def test_fp32_session_matches_eager_and_int8_stays_close(exported, eager_probs):
    from pt2aws.inference.variants import Classifier

    model_dir, files = exported
    model, tokenizer = load_fp32(str(model_dir))
    probs = {}
    for variant, path in files.items():
        session = ort.OrtClassifier(path, model.config)
        assert session.config is model.config  # the handler reads labels from it
        runner = Classifier(session, tokenizer, model.config, variant=variant, batch_size=5)
        probs[variant] = runner.predict_proba(TEXTS)
    assert (probs["ort-fp32"] - eager_probs).abs().max().item() < 1e-4  # the same fp32 model
    assert (probs["ort-int8"] - eager_probs).abs().max().item() < 0.02


def test_export_is_reused_and_redone_for_other_weights(exported, tmp_path):
    model_dir, files = exported
    before = {v: p.stat().st_mtime_ns for v, p in files.items()}
    assert ort.onnx_files(model_dir) == files  # up to date: nothing to export, no model needed
    assert {v: p.stat().st_mtime_ns for v, p in files.items()} == before
    stale = tmp_path / "model"
    shutil.copytree(model_dir, stale)
    record = stale / "onnx" / "export.json"
    record.write_text(json.dumps({**json.loads(record.read_text()), "weights_sha256": "0" * 64}))
    with pytest.raises(FileNotFoundError, match="exported from other weights"):
        ort.onnx_files(stale)
    shutil.rmtree(stale / "onnx")
    with pytest.raises(FileNotFoundError, match="variant_report with ort-fp32"):
        ort.onnx_files(stale)


def test_predictor_serves_ort_int8(exported):
    from pt2aws.inference.predictor import Predictor

    model_dir, _ = exported
    predictor = Predictor(str(model_dir), variant="ort-int8", batch_size=4)
    assert type(predictor.model).__name__ == "OrtClassifier"
    out = predictor.predict(TEXTS[:6])
    assert [set(p) for p in out] == [{"label", "score", "label_id"}] * 6
    windows = Predictor(str(model_dir), variant="ort-fp32", long_texts="windows")
    assert windows.predict_proba(["great " * 300]).shape == (1, 2)  # no token_type_ids given


def test_ort_support_reasons(monkeypatch):
    import importlib.util

    from pt2aws.inference.variants import cannot_run

    assert cannot_run("ort-int8", "cpu") is None
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name: None if name == "onnxruntime" else real(name)
    )
    assert "onnxruntime is not installed" in cannot_run("ort-int8", "cpu")


def test_archive_records_ort_agreement_ships_the_files_and_serves_them(
    exported, tmp_path, monkeypatch
):
    from pt2aws.aws import artifact
    from pt2aws.inference import selection
    from pt2aws.inference.selection import variant_report
    from pt2aws.serving import handler

    model_dir, _ = exported
    report = variant_report(str(model_dir), TEXTS, variants=("ort-fp32", "ort-int8"), sample=4)
    assert report["agreement"]["ort-fp32"] == 1.0  # the same fp32 maths, fused
    assert 0.9 <= report["agreement"]["ort-int8"] <= 1.0
    assert report["onnx"]["weights_sha256"] == ort.weights_digest(model_dir)
    archive = artifact.package(model_dir, tmp_path / "model.tar.gz", variants=report)
    with tarfile.open(archive) as tar:
        names = tar.getnames()
        requirements = tar.extractfile("code/requirements.txt").read().decode()
    assert {"onnx/model.onnx", "onnx/model_int8.onnx", "onnx/export.json"} <= set(names)
    assert "onnxruntime" not in requirements  # the AWS DLC route stays on PyTorch
    plain = artifact.package(model_dir, tmp_path / "plain.tar.gz")  # no ORT variant recorded
    with tarfile.open(plain) as tar:
        assert not [n for n in tar.getnames() if n.startswith("onnx/")]  # 100+ MB nobody reads

    served = tmp_path / "served"
    with tarfile.open(archive) as tar:
        tar.extractall(served, filter="data")
    monkeypatch.setenv("PT2AWS_VARIANT", "ort-int8")
    monkeypatch.setattr(handler, "choose_variant", selection.serving_variant)  # as the server does
    loaded = handler.model_fn(str(served))
    assert loaded["variant"] == "ort-int8"
    assert len(handler.predict_fn(TEXTS[:3], loaded)) == 3
    shutil.rmtree(served / "onnx")  # an archive packaged without them: refused with the reason
    with pytest.raises(ValueError, match="PT2AWS_VARIANT=ort-int8: .* has no model.onnx"):
        handler.model_fn(str(served))


def test_the_dlc_handler_stands_alone_and_never_imports_onnxruntime(smoke_model_dir):
    """The AWS DLC has torch and transformers only: the archive's code/inference.py alone
    serves eager, long texts as windows included, without pt2aws or onnxruntime."""
    from support.long_texts import LONG

    from pt2aws.serving import HANDLER_PATH

    code = (
        "import importlib.util, sys\n"
        f"spec = importlib.util.spec_from_file_location('inference', {str(HANDLER_PATH)!r})\n"
        "h = importlib.util.module_from_spec(spec); spec.loader.exec_module(h)\n"
        f"m = h.model_fn({str(smoke_model_dir)!r})\n"
        f"print(h.predict_fn(['fine', {LONG!r}], m)[1]['windows'])\n"
        "print(sorted(k for k in sys.modules if k.split('.')[0] in ('onnxruntime', 'onnx', 'pt2aws')))\n"
    )
    env = {"PT2AWS_VARIANT": "eager", "PT2AWS_LONG_TEXTS": "windows", "PATH": "/usr/bin:/bin",
           "HF_HUB_OFFLINE": "1"}  # fmt: skip
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
    )
    windows, modules = out.stdout.strip().splitlines()[-2:]
    assert int(windows) > 1 and modules == "[]"


def _figures(dp: float, speed: float) -> dict:
    return {"mean_abs_dp": dp, "flips": 1, "texts": 128, "samples_per_s": speed}


@pytest.mark.parametrize(
    ("reduce_range", "uint8", "ffn_fp32", "chosen"),
    [
        ((0.02, 100.0), (0.06, 130.0), (0.05, 90.0), "7-bit int8 weights (reduce_range)"),
        ((0.04, 100.0), (0.06, 130.0), (0.05, 90.0), "int8 weights"),  # faster, less accurate
        ((0.04, 100.0), (0.042, 130.0), (0.05, 90.0), "uint8 weights"),  # as accurate, faster
        ((0.04, 100.0), (0.06, 130.0), (0.02, 70.0), "int8 weights (FFN output projections fp32)"),
        ((0.04, 100.0), (0.06, 130.0), (0.02, 60.0), "int8 weights"),  # < 1.25x fp32's speed
    ],
)
def test_the_int8_settings_are_a_measured_choice(reduce_range, uint8, ffn_fp32, chosen):
    """Issue 31: of the settings at least 1.25x ort-fp32's speed (50 texts/s here), the most
    accurate, or a faster one nearly as accurate; the reason names each one and its figures."""
    figures = dict(zip(ort.INT8_SETTINGS, [_figures(0.04, 100.0), _figures(*reduce_range),
                                           _figures(*uint8), _figures(*ffn_fp32)]))  # fmt: skip
    setting, why = ort.choose_int8({"ort-fp32": _figures(0.0, 50.0), **figures})
    assert setting == chosen and why.startswith(f"{chosen}, measured on {ort.cpu_class()} (")
    assert all(f"{name}: mean |dp| " in why for name in ort.INT8_SETTINGS)
    assert "2.00x ort-fp32's speed" in why  # the default's


def test_none_fast_enough_keeps_the_default():
    figures = {name: _figures(0.04, 55.0) for name in ort.INT8_SETTINGS}
    setting, why = ort.choose_int8({"ort-fp32": _figures(0.0, 50.0), **figures})
    assert setting == "int8 weights" and "(none >= 1.25x ort-fp32's speed)" in why


def test_the_ffn_output_setting_keeps_those_projections_fp32(exported, tmp_path):
    import onnx

    model_dir, files = exported
    name = "int8 weights (FFN output projections fp32)"
    kept = ort.quantize(files["ort-fp32"], tmp_path / "ffn.onnx", name)
    ffn = [f"/inner/roberta/encoder/layer.{i}/output/dense/MatMul" for i in range(2)]
    assert sorted(k for k in kept if "classifier" not in k) == ffn
    ops = {n.name: n.op_type for n in onnx.load(str(tmp_path / "ffn.onnx")).graph.node}
    assert [ops[k] for k in ffn] == ["MatMul", "MatMul"]  # not quantized
    assert "/inner/roberta/encoder/layer.0/attention/output/dense/MatMul_quant" in ops


def test_the_export_measures_each_setting_on_validation_texts_and_keeps_one(
    smoke_model_dir, tmp_path
):
    model_dir = tmp_path / "model"
    shutil.copytree(smoke_model_dir, model_dir)
    model, tokenizer = load_fp32(str(model_dir))
    ort.onnx_files(model_dir, model, tokenizer, texts=TEXTS)
    int8 = json.loads((model_dir / "onnx" / "export.json").read_text())["int8"]
    assert set(int8["measured"]) == {"ort-fp32", *ort.INT8_SETTINGS}
    assert int8["settings"] in ort.INT8_SETTINGS
    assert int8["measured"]["ort-fp32"]["flips"] == 0
    for name in ort.INT8_SETTINGS:
        figures = int8["measured"][name]
        assert figures["texts"] == len(TEXTS) and figures["samples_per_s"] > 0
        assert 0 <= figures["flips"] <= len(TEXTS) and 0 < figures["mean_abs_dp"] < 0.5
    assert ort.choose_int8(int8["measured"]) == (int8["settings"], int8["why"])
    assert sorted(p.name for p in (model_dir / "onnx").glob("*.onnx")) == [
        "model.onnx", "model_int8.onnx"
    ]  # fmt: skip
    session = ort.OrtClassifier(model_dir / "onnx" / "model_int8.onnx", model.config)
    assert session.settings == int8["why"]  # what notebook 02's build line prints
