"""Sizing, ranking and the catalog, checked against hand calculations (written out below)."""

from __future__ import annotations

import json

import pytest

from pt2aws import catalog
from pt2aws.lessons.sizing import memory, ranking, strategy, tables, workload

# roberta-base, counted by hand from its config.json (vocab 50265, 514 positions, 1 token type,
# hidden 768, 12 layers, FFN 3072) with the classification head of RobertaForSequenceClassification.
H, FFN, L = 768, 3072, 12
EMBEDDINGS = 50265 * H + 514 * H + 1 * H + 2 * H  # word + position + type + LayerNorm
LAYER = 3 * (H * H + H) + (H * H + H) + 2 * H + (H * FFN + FFN) + (FFN * H + H) + 2 * H
HEAD = (H * H + H) + (H * 2 + 2)  # dense + out_proj (2 labels); no pooler
ROBERTA_BASE = EMBEDDINGS + L * LAYER + HEAD


def test_roberta_base_parameter_count_matches_hand_count():
    assert ROBERTA_BASE == 124_647_170
    spec = workload.model_spec("roberta-base")
    assert spec.parameters == ROBERTA_BASE
    assert (spec.hidden_size, spec.num_layers, spec.num_heads) == (768, 12, 12)
    # the closed form equals the model transformers builds (on the meta device)
    built = workload.ModelSpec.from_config(workload.roberta_base_config(), build=True)
    assert built.parameters == ROBERTA_BASE
    # a transformers config works too, and RobertaConfig() defaults differ only in embeddings
    from transformers import BertConfig, RobertaConfig

    default = workload.model_spec(RobertaConfig(num_labels=2))
    assert default.parameters - ROBERTA_BASE == (512 - 514) * H + (2 - 1) * H
    minilm = BertConfig(
        hidden_size=384, num_hidden_layers=6, num_attention_heads=12, intermediate_size=1536
    )
    assert (
        workload.model_spec(minilm).parameters
        == workload.ModelSpec.from_config(minilm, build=True).parameters
    )


def test_training_memory_roberta_base_by_hand():
    mem = memory.training_memory("roberta-base", micro_batch=32, seq_len=128, precision="mixed")
    assert mem["weights"] == 4 * ROBERTA_BASE
    assert mem["gradients"] == 4 * ROBERTA_BASE
    assert mem["optimizer"] == 8 * ROBERTA_BASE  # AdamW m and v in fp32
    # Korthikanti et al.: s*b*h*(34 + 5*a*s/h) per layer = 128*32*768*(34 + 10) = 138,412,032
    assert mem["activations"] == 12 * 128 * 32 * 768 * 44 == 1_660_944_384
    assert mem["total"] == 16 * ROBERTA_BASE + 1_660_944_384
    pure = memory.training_memory("roberta-base", 32, 128, precision="bf16")
    assert pure["weights"] + pure["gradients"] + pure["optimizer"] == 8 * ROBERTA_BASE
    sharded = memory.training_memory("roberta-base", 32, 128, shards=8)
    assert sharded["optimizer"] == 8 * ROBERTA_BASE / 8
    recompute = memory.training_memory("roberta-base", 32, 128, recompute=True)
    assert recompute["activations"] == 2 * 128 * 32 * 768 * 12 + 128 * 32 * 768 * 44


def test_inference_memory_by_hand():
    mem = memory.inference_memory("roberta-base", batch=1, seq_len=128)
    assert mem["weights"] == 2 * ROBERTA_BASE
    assert mem["activations"] == 128 * 1 * 768 * 44
    assert mem["total"] == 2 * ROBERTA_BASE + 4_325_376


def test_roberta_base_fits_one_gpu_and_is_small():
    plan = strategy.plan_training("roberta-base", "g5.xlarge", micro_batch=32, seq_len=128)
    assert plan["nodes"] == 1 and plan["strategy"] == "single device"
    assert plan["memory_per_device_bytes"] < 24e9 * 0.9
    assert strategy.workload_class("roberta-base")["class"] == "small"


def test_70b_does_not_fit_one_p4d_and_needs_nodes():
    # 16 B/param x 70e9 = 1.12 TB of state; one p4d holds 8 x 40 GB x 0.9 = 288 GB.
    spec = workload.model_spec("70B")
    assert (spec.num_layers, spec.hidden_size, spec.num_heads) == (71, 9088, 71)
    assert 16 * spec.parameters > 8 * 40e9 * 0.9
    plan = strategy.plan_training(spec, "p4d.24xlarge", micro_batch=1, seq_len=2048)
    # with recomputation, activations = 2*s*b*h*L + one layer = 2,642,935,808 + 2,121,793,536;
    # k nodes need 1.12e12/(8k) + 4.76e9 <= 36e9: k = 4 gives 39.8e9 (no), k = 5 gives 32.8e9
    assert plan["nodes"] == 5 and plan["recompute"] is True
    assert "FSDP over 5 nodes" in plan["strategy"]
    assert plan["memory_per_device_bytes"] == pytest.approx(1.12e12 / 40 + 4_764_729_344)
    # pure bf16 (8 B/param = 560 GB) does not fit one p4d either: 70e9/k + 4.76e9 <= 36e9 -> k = 3
    assert strategy.plan_training(spec, "p4d.24xlarge", 1, 2048, precision="bf16")["nodes"] == 3
    assert strategy.workload_class(spec, 1, 2048)["class"] == "big"
    assert strategy.workload_class("2000B", 1, 2048)["class"] == "huge"
    # no multi-node plan without EFA: g6e.xlarge cannot hold it alone
    assert strategy.plan_training(spec, "g6e.xlarge", 1, 2048) is None


def test_rank_training_time_and_cost_by_hand():
    rows = ranking.rank_training("roberta-base", train_tokens=1_000_000 * 128, epochs=3)
    by = {r["instance"]: r for r in rows}
    # (6 N + 12 L d T) per token, N without the embedding tables (Kaplan et al. 2020; PaLM B)
    non_embedding = ROBERTA_BASE - (EMBEDDINGS - 2 * H)
    flops = (6 * non_embedding + 12 * L * H * 128) * 1_000_000 * 128 * 3
    g5 = by["g5.xlarge"]
    assert g5["time_s"] == pytest.approx(flops / (70e12 * 0.35), rel=1e-12)  # 8,276.3 s
    # cost adds 600 s of paid start-up (DEFAULT_OVERHEAD_S)
    assert g5["cost_usd"] == pytest.approx((flops / (70e12 * 0.35) + 600) / 3600 * 1.006, rel=1e-12)
    p4d = by["p4d.24xlarge"]
    assert p4d["strategy"] == "DDP over 8 devices"
    assert p4d["cost_usd"] == pytest.approx(
        (flops / (8 * 312e12 * 0.35) + 600) / 3600 * 21.96, rel=1e-12
    )
    bare = ranking.rank_training(
        "roberta-base", 128_000_000, 3, instances=["p4d.24xlarge"], overhead_s=0
    )
    assert bare[0]["cost_usd"] == pytest.approx(flops / (8 * 312e12 * 0.35) / 3600 * 21.96)
    assert "inf2.xlarge" not in by  # inference only
    assert sum(r["cheapest"] for r in rows) == 1 and sum(r["fastest"] for r in rows) == 1
    priced = [r["cost_usd"] for r in rows if r["cost_usd"] is not None]
    assert priced == sorted(priced)
    cheapest = next(r for r in rows if r["cheapest"])
    assert cheapest["cost_usd"] == min(priced)
    fastest = next(r for r in rows if r["fastest"])
    assert fastest["time_s"] == min(r["time_s"] for r in rows)
    with pytest.raises(ValueError, match="must be positive"):
        ranking.rank_training("roberta-base", train_tokens=0)


def test_rank_inference_measured_and_estimated():
    rows = ranking.rank_inference("roberta-base", throughput_rps={"ml.c7g.xlarge": 20.0})
    by = {r["instance"]: r for r in rows}
    assert by["c7g.xlarge"]["usd_per_million"] == pytest.approx(0.145 / (3600 * 20) * 1e6)
    assert by["c7g.xlarge"]["throughput_source"] == "measured (given)"
    assert by["c7g.xlarge"]["arch"] == "arm64" and by["c7i.xlarge"]["arch"] == "x86_64"
    # estimated: peak x 10 % / (2 x params x 128 tokens)
    assert by["g5.xlarge"]["throughput_rps"] == pytest.approx(
        70e12 * 0.1 / (2 * ROBERTA_BASE * 128)
    )
    assert {"c7g.xlarge", "c8g.xlarge", "c7i.xlarge", "g5.xlarge", "inf2.xlarge"} <= set(by)
    assert sum(r["cheapest"] for r in rows) == 1


def test_recommend_roberta_base_on_1m_examples():
    rec = ranking.recommend(workload.Workload("roberta-base", train_examples=1_000_000))
    assert rec["model"]["parameters"] == ROBERTA_BASE
    assert rec["workload"]["train_tokens_per_epoch"] == 128_000_000
    assert rec["class"]["class"] == "small"
    assert rec["recommended"]["instance"] == rec["cheapest"]  # the cheapest row is a GPU here
    json.dumps(rec)
    text = tables.format_recommendation(rec)
    assert "124,647,170 parameters" in text and "cheapest" in text and "| g5.xlarge |" in text


def test_bad_input_errors_name_the_fix():
    with pytest.raises(ValueError, match="roberta-base"):
        workload.model_spec("gpt-unknown")
    with pytest.raises(ValueError, match="choose one of"):
        memory.training_memory("roberta-base", precision="fp8")
    with pytest.raises(KeyError, match="not in the catalog"):
        catalog.get_instance("x9.huge")
    with pytest.raises(ValueError, match="train_examples"):
        workload.Workload("roberta-base", train_examples=0)
    with pytest.raises(ValueError, match="choose one of mixed, bf16, fp32"):
        workload.Workload("roberta-base", precision="fp8")
    assert set(workload.PRECISIONS) == set(memory.STATE_BYTES_PER_PARAM)
    assert set(workload.PRECISIONS) == set(memory.INFERENCE_BYTES_PER_PARAM)


def test_catalog_is_complete_sourced_and_packaged():
    names = {i.name for i in catalog.load_catalog()}
    families = {n.split(".")[0] for n in names}
    assert {
        "g5",
        "g6",
        "g6e",
        "p4d",
        "p4de",
        "p5",
        "p5e",
        "p5en",
        "trn1",
        "trn2",
        "inf2",
    } <= families
    assert {"c7g", "c8g", "m7g", "m8g", "c7i", "m7i"} <= families
    for it in catalog.load_catalog():
        assert catalog.availability(it.name)["ec2"], f"{it.name} unknown to EC2"
        for src in it.sources.values():
            assert src["url"] and src["date"] and isinstance(src["verified"], bool)
        assert it.peak_bf16_tflops > 0 and it.vcpus > 0
    p4d = catalog.get_instance("ml.p4d.24xlarge")
    assert (p4d.accelerator_count, p4d.accelerator_memory_gb, p4d.peak_bf16_tflops) == (8, 40, 2496)
    assert p4d.sources["peak"]["verified"] is True  # A100 312 TFLOP/s read in stored material
    pyproject = (catalog.CATALOG_PATH.parents[2] / "pyproject.toml").read_text()
    package_data = pyproject.split("[tool.setuptools.package-data]")[1].split("[")[1]
    assert '"instances.json"' in package_data  # shipped with the wheel


def test_family_processor_generation_and_bf16_come_from_the_catalog():
    assert catalog.family_processor("ml.c7g.xlarge") == "Graviton3"
    assert catalog.family_processor("c6gd.2xlarge") == "Graviton2"  # cpu_families, no row
    assert catalog.family_processor("g5.xlarge") == "AMD EPYC 2nd gen"  # the family's row
    assert catalog.family_processor("x9.large") is None
    with pytest.raises(ValueError, match="ml.<family>.<size>"):
        catalog.family_processor("c7g")
    gens = {t: catalog.graviton_generation(t) for t in ("ml.c6g.large", "c7g.xlarge", "r8g.large")}
    assert gens == {"ml.c6g.large": 2, "c7g.xlarge": 3, "r8g.large": 4}
    assert catalog.graviton_generation("ml.c7i.xlarge") is None
    assert [catalog.architecture(t) for t in ("ml.c8g.xlarge", "c7i.xlarge", "g5.xlarge")] == [
        "arm64",
        "x86_64",
        "x86_64",
    ]
    bf16 = {t: catalog.has_bf16(t) for t in ("c6g.xlarge", "c7g.xlarge", "c8g.xlarge", "c7i.large")}
    assert bf16 == {"c6g.xlarge": False, "c7g.xlarge": True, "c8g.xlarge": True, "c7i.large": True}
    assert not catalog.has_bf16("ml.c6i.xlarge") and not catalog.has_bf16("x9.large")


def test_instance_vcpus_row_then_size_rule():
    assert catalog.instance_vcpus("ml.p4d.24xlarge") == 96  # the catalog row
    assert catalog.instance_vcpus("ml.c6i.2xlarge") == 8  # rule: xlarge 4, each step doubles
    assert catalog.instance_vcpus("r7g.16xlarge") == 64
    assert catalog.instance_vcpus("ml.c7g.medium") == 1  # a Graviton medium is one core
    assert catalog.instance_vcpus("t3.medium") == 2  # x86 burstable
    with pytest.raises(ValueError, match="unknown size 'metal'.*pass vcpus="):
        catalog.instance_vcpus("c7g.metal")


def test_graviton_cpu_parts_and_catalog_consistency():
    assert catalog.processor_by_cpu_part("0xD40") == ("Graviton3", "Neoverse V1")
    assert catalog.processor_by_cpu_part(" 0xd0c") == ("Graviton2", "Neoverse N1")
    assert catalog.processor_by_cpu_part("0xd4f") == ("Graviton4", "Neoverse V2")
    assert catalog.processor_by_cpu_part("0xd08") is None  # Cortex-A72 (e.g. a Raspberry Pi 4)
    data = json.loads(catalog.CATALOG_PATH.read_text())
    cpus = {k: v for k, v in data["cpus"].items() if k != "note"}
    for family, cpu in data["cpu_families"].items():
        assert family == "note" or cpu in cpus, f"{family}: {cpu} is not a key of cpus"
    for name, cpu in cpus.items():
        assert cpu["source"] in data["sources"]
        assert name.startswith("Graviton") == ("cpu_part" in cpu) == (cpu["arch"] == "arm64")
    with pytest.raises(catalog.CatalogError, match="unknown source id"):
        catalog.source("no-such-source")


def test_hosting_prices_are_sagemaker_types_with_a_dated_unverified_source():
    prices = catalog.hosting_prices()
    assert {"ml.c6g.xlarge", "ml.c7g.xlarge", "ml.c8g.xlarge", "ml.c6i.xlarge"} <= set(prices)
    c7g = catalog.hosting_price("c7g.xlarge")
    assert c7g == catalog.hosting_price("ml.c7g.xlarge") == prices["ml.c7g.xlarge"]
    assert (c7g.usd_per_hour, c7g.processor, c7g.verified) == (0.1734, "Graviton3", False)
    assert c7g.source["id"] == "sagemaker-hosting-pricing" and c7g.source["date"] == "2026-11-30"
    # SageMaker hosting costs more than EC2 for the same hardware (0.1734 vs 0.145 USD/h)
    assert c7g.usd_per_hour > catalog.get_instance("c7g.xlarge").price_usd_per_hour
    assert catalog.hosting_price("ml.c5.9xlarge") is None
    hosting = catalog.botocore_instance_types("hosting")
    for name, price in prices.items():
        assert name in hosting and price.processor and price.source["url"]


def test_botocore_lists_and_gpu_peaks_have_one_definition():
    assert "c7g.xlarge" in catalog.botocore_instance_types("ec2")
    assert "ml.p4d.24xlarge" in catalog.botocore_instance_types("training")
    assert "ml.c7g.xlarge" in catalog.botocore_instance_types("hosting")
    assert "ml.c7g.xlarge" not in catalog.botocore_instance_types("training")
    with pytest.raises(ValueError, match="choose one of ec2, training, hosting"):
        catalog.botocore_instance_types("lambda")
    # MFU's peak (torch device name) and the ranking's peak (instance row) are the same figure
    for device, instance in (
        ("NVIDIA A10G", "g5.xlarge"),
        ("NVIDIA A100-SXM4-40GB", "p4d.24xlarge"),
    ):
        it = catalog.get_instance(instance)
        assert catalog.peak_bf16_flops(device) * it.accelerator_count == it.peak_bf16_tflops * 1e12
    assert catalog.peak_bf16_flops("NVIDIA A100-SXM4-80GB") == 312e12  # longest pattern wins


def test_tiny_roberta_count_matches_the_model_modeling_builds():
    from types import SimpleNamespace

    from pt2aws.modeling import TINY_ROBERTA_SIZES, build_tiny_roberta, count_parameters

    class Tokenizer(SimpleNamespace):  # what build_tiny_roberta reads, at the largest vocabulary
        def __len__(self):
            return TINY_ROBERTA_SIZES["vocab_size"]

    tokenizer = Tokenizer(model_max_length=128, pad_token_id=1, bos_token_id=0, eos_token_id=2)
    model = build_tiny_roberta(tokenizer, ["negative", "positive"])
    assert count_parameters(model) == workload.model_spec("tiny-roberta").parameters
