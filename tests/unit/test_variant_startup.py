"""An endpoint starts on the variants that work where it runs (issue 17: the image had no C++
compiler, so torch.compile failed at the warm-up of int8 and took the server down)."""

from __future__ import annotations

import json
import shutil

import pytest

from pt2aws.inference import selection, variants

TEXTS = ["great phone", "worst service ever", "the battery died", "love it", "meh", "ok"]
NO_COMPILER = "torch.compile on a CPU needs a C++ compiler and none was found (test)"


@pytest.fixture
def no_compiler(monkeypatch):
    """This machine as the image was: no C++ compiler for Inductor."""
    monkeypatch.setattr(variants, "compiler_missing", lambda: NO_COMPILER)


def test_compiler_check_finds_this_machines_compiler_and_headers():
    variants.compiler_missing.cache_clear()
    assert variants.compiler_missing() is None  # the dev machines have g++ and Python.h


def test_compiler_check_names_what_is_missing(monkeypatch):
    from torch._inductor import cpp_builder, exc

    def no_cxx():
        raise exc.InvalidCxxCompiler()

    monkeypatch.setattr(cpp_builder, "get_cpp_compiler", no_cxx)
    variants.compiler_missing.cache_clear()
    try:
        why = variants.compiler_missing()
    finally:
        variants.compiler_missing.cache_clear()
    assert "needs a C++ compiler" in why and "install g++" in why and "int8-legacy" in why


def test_compiled_variants_are_not_supported_without_a_compiler(no_compiler):
    for variant in ("int8", "compile"):
        ok, why = variants.variant_support(variant, "cpu")
        assert not ok and why == NO_COMPILER
    for variant in ("eager", "bf16", "int8-legacy"):  # need no compiler
        assert variants.variant_support(variant, "cpu")[1] != NO_COMPILER


def test_a_named_compiled_variant_is_refused_at_start_with_the_reason(no_compiler, smoke_model_dir):
    from transformers import AutoModelForSequenceClassification

    model = AutoModelForSequenceClassification.from_pretrained(smoke_model_dir).eval()
    with pytest.raises(ValueError, match="PT2AWS_VARIANT=int8: torch.compile on a CPU needs"):
        selection.serving_variant(str(smoke_model_dir), model, "int8")


def test_auto_with_int8_eligible_serves_without_a_compiler(
    no_compiler, smoke_model_dir, tmp_path, capsys
):
    """The case that took the image down: variants.json lists int8 as eligible."""
    from transformers import AutoModelForSequenceClassification

    model_dir = tmp_path / "model"
    shutil.copytree(smoke_model_dir, model_dir)
    record = {"eligible": ["int8", "int8-legacy"], "sample": TEXTS, "agreement": {}}
    (model_dir / "variants.json").write_text(json.dumps(record))
    model = AutoModelForSequenceClassification.from_pretrained(model_dir).eval()
    call, variant, reason = selection.serving_variant(str(model_dir), model, "auto")
    assert variant in ("eager", "int8-legacy") and reason.startswith("auto, measured at start-up")
    printed = capsys.readouterr().out
    assert f"int8: not timed ({NO_COMPILER})" in printed  # the reason is in the log
    assert call is not None


def test_auto_skips_a_candidate_that_fails_to_build(smoke_model_dir, monkeypatch, caplog):
    """Any build or first-call failure of a candidate leaves it out; eager still serves."""
    real_build = variants.build_variant

    def broken_int8_legacy(model, variant, device, **kwargs):
        if variant == "int8-legacy":
            raise RuntimeError("no kernel for this CPU\nlong compiler output ...")
        return real_build(model, variant, device, **kwargs)

    monkeypatch.setattr(selection, "build_variant", broken_int8_legacy)
    with caplog.at_level("WARNING", logger="pt2aws.inference.selection"):
        result = selection.compare_variants(
            str(smoke_model_dir), TEXTS, ["int8-legacy"], latency_calls=2, repeats=1,
            device="cpu",
        )  # fmt: skip
    assert [r["variant"] for r in result["rows"]] == ["eager"]
    assert result["skipped"]["int8-legacy"] == (
        "failed to build here: RuntimeError: no kernel for this CPU"
    )
    assert result["auto"]["variant"] == "eager"
    assert "variant int8-legacy left out" in caplog.text


def test_eager_failing_is_not_hidden(smoke_model_dir, monkeypatch):
    def broken(model, variant, device, **kwargs):
        raise RuntimeError("eager broke")

    monkeypatch.setattr(selection, "build_variant", broken)
    with pytest.raises(RuntimeError, match="eager broke"):
        selection.compare_variants(str(smoke_model_dir), TEXTS, ["int8"], repeats=1, device="cpu")
