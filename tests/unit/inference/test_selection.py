"""Tests of :mod:`pt2aws.inference.selection`: ``auto``, chosen by measurement (issue 23), and
what the archive records (``variants.json``)."""

import functools
import json
import shutil
import warnings

import pytest
from support.compiler import NO_COMPILER
from support.cpu import OLD_X86, fake_cpu
from support.texts import TEXTS

from pt2aws import env
from pt2aws.inference import selection, variants
from pt2aws.inference.selection import Measured, fastest_agreeing

#: A CPU with native bf16 and no int8 dot products: bf16 is timed, torchao int8 left out.
BF16_NO_VNNI = fake_cpu("bf16 x86", "x86_64", {"avx2", "avx512f", "avx512_bf16"})


def pick_variant(rows, left_out=None):
    return Measured(rows, {}, {}).choice(left_out)


def _row(variant, sps, agreement=1.0, p50=2.0, calls=30, texts=1000):
    return {
        "variant": variant,
        "samples_per_s": sps,
        "agreement": agreement,
        "agreement_texts": texts,
        "p50_ms": p50,
        "calls": calls,
    }


def test_fastest_agreeing_needs_the_agreement_target():
    rows = [_row("eager", 100.0), _row("int8", 300.0, 0.985), _row("bf16", 150.0, 0.995)]
    assert fastest_agreeing(rows)["variant"] == "bf16"
    assert fastest_agreeing(rows, min_agreement=0.98)["variant"] == "int8"
    with pytest.raises(ValueError, match="no variant keeps"):
        fastest_agreeing(rows[1:2])


def test_pick_variant_keeps_eager_unless_another_agrees_and_is_faster():
    choice = pick_variant([_row("eager", 100.0), _row("int8", 250.0, 0.995), _row("bf16", 90.0)])
    assert choice.variant == "int8" and choice.reason.startswith(
        "2.50x eager's batch-32 throughput"
    )
    choice = pick_variant([_row("eager", 100.0), _row("int8", 250.0, 0.985)])
    assert choice.variant == "eager"
    assert choice.left_out == {"int8": "98.5% label agreement on 1,000 texts < 99%"}
    choice = pick_variant([_row("eager", 100.0), _row("bf16", 104.0)])  # within the 5% margin
    assert choice.variant == "eager" and "best other: bf16 at 1.04x" in choice.reason
    with pytest.raises(ValueError, match="eager row"):
        pick_variant([_row("int8", 250.0)])


def test_the_reason_names_every_candidate_left_out_and_why():
    """Issue 23: int8 at 3.03x eager dropped by the latency guard, and the reason said nothing."""
    rows = [_row("eager", 100.0, p50=12.5), _row("int8", 303.0, 0.996, p50=30.0),
            _row("ort-fp32", 103.0, p50=11.0), _row("bf16", 400.0, 0.98, p50=9.0)]  # fmt: skip
    choice = pick_variant(rows, {"ort-int8": "onnx/ has no model.onnx"})
    assert choice.variant == "eager"
    assert choice.reason == (
        "no variant beats eager by 5% here; best other: ort-fp32 at 1.03x; left out: "
        "ort-int8 (onnx/ has no model.onnx); "
        "int8 (batch-1 p50 30.0 ms > 2x eager's 12.5 ms (medians of 30 calls)); "
        "bf16 (98.0% label agreement on 1,000 texts < 99%)"
    )
    assert set(choice.left_out) == {"ort-int8", "int8", "bf16"}
    rows[1]["p50_ms"] = 7.4  # the same int8, measured quick at batch 1: chosen
    assert pick_variant(rows).variant == "int8"


def test_measure_variants_times_what_runs_here_and_reports_each_line(
    smoke_model_dir, monkeypatch, capsys
):
    monkeypatch.setattr(env, "cpu_features", BF16_NO_VNNI)
    model, tokenizer = variants.load_fp32(str(smoke_model_dir))
    measured = selection.measure_variants(model, tokenizer, TEXTS, ["int8", "bf16"],
                                          latency_calls=3, repeats=1, log=print)  # fmt: skip
    assert [r["variant"] for r in measured.rows] == ["eager", "bf16"]  # eager: the reference
    assert "bf16 x86 has no AVX512-VNNI" in measured.skipped["int8"]
    eager, bf16 = measured.rows
    assert eager["agreement"] == 1.0 and eager["calls"] == 3 and bf16["setup_s"] > 0
    assert fastest_agreeing(measured.rows)["variant"] in ("eager", "bf16")
    auto = measured.choice()
    assert auto.variant in ("eager", "bf16") and "int8 (no int8 dot products" in auto.reason
    printed = capsys.readouterr().out
    assert "bf16: built in" in printed and "pass 1/1: eager" in printed


def test_auto_skips_a_candidate_that_fails_to_build(smoke_model_dir, monkeypatch, caplog):
    """Any build or first-call failure of a candidate leaves it out; eager still serves."""
    real_build = variants.build_variant

    def broken_bf16(model, variant, device, **kwargs):
        if variant == "bf16":
            raise RuntimeError("no kernel for this CPU\nlong compiler output ...")
        return real_build(model, variant, device, **kwargs)

    monkeypatch.setattr(env, "cpu_features", BF16_NO_VNNI)
    monkeypatch.setattr(selection, "build_variant", broken_bf16)
    model, tokenizer = variants.load_fp32(str(smoke_model_dir))
    with caplog.at_level("WARNING", logger="pt2aws.inference.selection"):
        measured = selection.measure_variants(model, tokenizer, TEXTS[:6], ["bf16"],
                                              latency_calls=2, repeats=1)  # fmt: skip
    assert [r["variant"] for r in measured.rows] == ["eager"]
    assert measured.skipped["bf16"] == "failed to build here: RuntimeError: no kernel for this CPU"
    auto = measured.choice()
    assert auto.variant == "eager" and "bf16 (failed to build" in auto.reason
    assert "variant bf16 left out" in caplog.text

    def broken(model, variant, device, **kwargs):
        raise RuntimeError("eager broke")

    monkeypatch.setattr(selection, "build_variant", broken)
    with pytest.raises(RuntimeError, match="eager broke"):
        selection.measure_variants(model, tokenizer, TEXTS[:6], ["bf16"], repeats=1)


def test_a_named_compiled_variant_is_refused_at_start_with_the_reason(no_compiler, smoke_model_dir):
    model, tokenizer = variants.load_fp32(str(smoke_model_dir))
    with pytest.raises(ValueError, match="PT2AWS_VARIANT=int8: torch.compile on a CPU needs"):
        selection.serving_variant(str(smoke_model_dir), model, "int8", tokenizer)
    with pytest.raises(ValueError, match="PT2AWS_VARIANT='fp4'"):
        selection.serving_variant(str(smoke_model_dir), model, "fp4", tokenizer)


def test_a_named_bf16_is_refused_where_emulated_and_int8_served_saying_it_is_slow(
    smoke_model_dir, monkeypatch, capsys
):
    monkeypatch.setattr(env, "cpu_features", OLD_X86)
    model, tokenizer = variants.load_fp32(str(smoke_model_dir))
    with pytest.raises(ValueError, match=r"PT2AWS_VARIANT=bf16: no native bf16 \(old x86 has no"):
        selection.serving_variant(str(smoke_model_dir), model, "bf16", tokenizer)
    monkeypatch.setattr(variants, "compiler_missing", lambda: None)
    _, variant, reason = selection.serving_variant(str(smoke_model_dir), model, "int8", tokenizer)
    assert (variant, reason) == ("int8", "PT2AWS_VARIANT")
    assert "PT2AWS_VARIANT=int8: no int8 dot products (old x86 has no" in capsys.readouterr().out


def test_auto_with_int8_eligible_serves_without_a_compiler(
    no_compiler, smoke_model_dir, tmp_path, monkeypatch
):
    """The case that took the image down: variants.json lists int8 as eligible (and bf16, slow
    on this CPU, and ort-int8, whose files this archive lacks)."""
    monkeypatch.setattr(env, "cpu_features", OLD_X86)
    model_dir = tmp_path / "model"
    shutil.copytree(smoke_model_dir, model_dir)
    record = {"eligible": ["int8", "bf16", "ort-int8"], "sample": TEXTS[:6], "agreement": {}}
    (model_dir / "variants.json").write_text(json.dumps(record))
    model, tokenizer = variants.load_fp32(str(model_dir))
    few = functools.partial(selection.measure_variants, latency_calls=3, repeats=1)
    monkeypatch.setattr(selection, "measure_variants", few)
    call, variant, reason = selection.serving_variant(str(model_dir), model, "auto", tokenizer)
    assert variant == "eager" and reason.startswith("auto, measured at start-up")
    assert f"int8 ({NO_COMPILER})" in reason  # every candidate left out, with why
    assert "bf16 (no native bf16 (old x86 has no" in reason
    assert "ort-int8 (" in reason and "has no model.onnx" in reason
    assert call is not None


def test_the_archive_records_agreement_with_eager_on_validation_texts(
    smoke_model_dir, eager_probs, monkeypatch
):
    from pt2aws.inference.predictor import Predictor
    from pt2aws.metrics.agreement import label_agreement

    monkeypatch.setattr(env, "cpu_features", BF16_NO_VNNI)  # bf16 native: auto may choose it
    texts = [*TEXTS, "", "  "]  # empty texts are left out
    report = selection.variant_report(str(smoke_model_dir), texts, ("bf16",), sample=4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # bf16 may be emulated here
        bf16 = Predictor(str(smoke_model_dir), variant="bf16").predict_ids(TEXTS)
    by_hand = label_agreement(eager_probs.argmax(-1).tolist(), bf16)
    assert report["agreement"] == {"bf16": pytest.approx(by_hand, abs=1e-6)}
    assert 0.9 <= by_hand <= 1.0 and report["texts"] == len(TEXTS)
    assert report["eligible"] == [v for v, a in report["agreement"].items() if a >= 0.99]
    assert report["sample"] == TEXTS[:4] and report["target"] == 0.99 and "onnx" not in report
    assert report["agreement_texts"] == {"bf16": len(TEXTS)} and report["left_out"] == {}
    assert report["why"]["bf16"].startswith(f"{by_hand:.1%} label agreement on {len(TEXTS)} texts")
    with pytest.raises(ValueError, match="needs validation texts"):
        selection.variant_report(str(smoke_model_dir), ["", " "])


def test_the_archive_reuses_notebook_02s_agreement_where_its_texts_decide(
    smoke_model_dir, tmp_path, monkeypatch
):
    monkeypatch.setattr(env, "cpu_features", BF16_NO_VNNI)
    record = tmp_path / "metrics.json"
    rows = [{"variant": "eager", "agreement": 1.0}, {"variant": "int8", "agreement": 0.25}]
    record.write_text(json.dumps({"agreement_texts": {"count": len(TEXTS)}, "variants": rows}))
    report = selection.variant_report(
        str(smoke_model_dir), TEXTS, ("int8", "bf16"), measured=record
    )
    assert report["agreement"]["int8"] == 0.25 and "int8" not in report["eligible"]
    assert report["source"] == {"int8": "notebook 02", "bf16": "measured here"}
    assert report["why"]["int8"] == f"25.0% label agreement on {len(TEXTS)} texts < 99%"
    rows[1] = {"variant": "int8", "agreement": 1.0, "agreement_texts": 8}  # 8 of 24: undecided
    record.write_text(json.dumps({"agreement_texts": {"count": 8}, "variants": rows}))
    other = selection.variant_report(str(smoke_model_dir), TEXTS, ("int8",), measured=record)
    assert other["source"] == {"int8": "measured here"} and other["agreement_texts"]["int8"] == 24


def test_the_archive_measures_no_variant_notebook_02_left_out(
    smoke_model_dir, tmp_path, monkeypatch
):
    """Issue 30: notebook 03 measured bf16 and int8 again where 02 had left them out (72 s of
    its 110 s on an AVX2 EPYC). They are recorded as left out, with 02's reason, unbuilt."""
    built, real_build = [], selection.build_variant

    def recording(model, variant, *args, **kwargs):
        built.append(variant)
        return real_build(model, variant, *args, **kwargs)

    monkeypatch.setattr(selection, "build_variant", recording)
    monkeypatch.setattr(env, "cpu_features", BF16_NO_VNNI)  # 02's reasons decide, not this CPU's
    why = {"bf16": "no native bf16 (an AVX2 EPYC): bf16 is emulated", "int8": "no VNNI"}
    record = tmp_path / "metrics.json"
    record.write_text(json.dumps({"agreement_texts": {"count": 8}, "left_out": why,
                                  "variants": [{"variant": "eager", "agreement": 1.0}]}))  # fmt: skip
    report = selection.variant_report(
        str(smoke_model_dir), TEXTS, ("bf16", "int8"), measured=record
    )
    assert built == [] and report["agreement"] == {} and report["eligible"] == []
    assert report["left_out"] == why and report["why"] == why
    assert report["source"] == {
        "bf16": "left out by notebook 02",
        "int8": "left out by notebook 02",
    }
    monkeypatch.setattr(env, "cpu_features", OLD_X86)  # no record: what auto cannot choose here
    alone = selection.variant_report(str(smoke_model_dir), TEXTS, ("bf16", "int8"))
    assert built == [] and set(alone["left_out"]) == {"bf16", "int8"}
    assert alone["source"]["bf16"] == "left out here" and "no native bf16" in alone["why"]["bf16"]


class _Labels:
    """A built variant that labels ``flipped`` texts 1 and the others 0."""

    def __init__(self, flipped=()):
        self.flipped = set(flipped)

    def predict_ids(self, texts):
        return [int(t in self.flipped) for t in texts]


def test_a_variant_at_98_8_percent_is_not_chosen_on_the_evidence_of_few_texts(capsys):
    """Issue 31: ort-int8 at 99.2% on 128 texts and 98.8% on all 1,362 validation texts."""
    pool = [f"validation text {i}" for i in range(1362)]
    built = {"eager": _Labels(), "ort-int8": _Labels([pool[5], *pool[500:515]])}
    rows = [_row("eager", 100.0, texts=128), _row("ort-int8", 272.0, 127 / 128, texts=128)]
    measured = Measured(rows, {}, built, available=len(pool))
    assert measured.choice().left_out == {
        "ort-int8": "99.2% label agreement on 128 texts: too few to tell 99% from 98%"
    }
    selection.settle_agreement(measured, pool, log=print)
    assert rows[1]["agreement"] == 1346 / 1362 and rows[1]["agreement_texts"] == 1362
    assert "measured again on all 1,362 validation texts: 98.8% label agreement" in (
        capsys.readouterr().out
    )
    auto = measured.choice()
    assert auto.variant == "eager"
    assert "ort-int8 (98.8% label agreement on 1,362 texts < 99%)" in auto.reason
    built["ort-int8"] = _Labels(pool[500:505])  # 99.6% on all of them: chosen, with the count
    rows[1].update(agreement=127 / 128, agreement_texts=128)
    selection.settle_agreement(measured, pool)
    auto = measured.choice()
    assert auto.variant == "ort-int8"
    assert (
        auto.reason
        == "2.72x eager's batch-32 throughput here, 99.6% label agreement on 1,362 texts"
    )
    alone = Measured([dict(r, agreement=127 / 128, agreement_texts=128) for r in rows], {}, built)
    assert "all there are; 753 would tell" in alone.choice().reason  # no more texts: said so


def test_the_endpoint_takes_eligibility_from_the_archive_and_rejects_only_a_clear_failure():
    packaged = {"ort-int8": "99.3% label agreement on 1,362 texts"}
    rows = [_row("eager", 100.0, texts=64), _row("ort-int8", 250.0, 63 / 64, texts=64)]
    auto = Measured(rows, {}, {}).choice(packaged=packaged)
    assert auto.variant == "ort-int8" and auto.reason == (
        "2.50x eager's batch-32 throughput here, 99.3% label agreement on 1,362 texts at "
        "packaging; here 98.4% on 64 texts, only a clear failure would leave it out"
    )
    rows[1]["agreement"] = 58 / 64  # broken on this machine
    auto = Measured(rows, {}, {}).choice(packaged=packaged)
    assert auto.variant == "eager" and "here 90.6% on 64 texts, clearly below" in auto.reason
