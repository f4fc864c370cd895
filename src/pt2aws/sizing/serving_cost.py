"""What serving costs per 1M inferences: the one FLOPs model, the measured anchors of the
utilisation (:func:`utilisation`; figures and sources in ``instances.json``), and the one
cost-row schema of notebooks 00 and 03 and ``pt2aws recommend``::

    inferences/s      = peak FLOP/s x utilisation / FLOPs per request
    FLOPs per request = (2N + 4LdT) x T    (a third of training's 6N + 12LdT per token)
    utilisation       = an anchor's achieved FLOP/s / the peak of the machine that achieved it
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from pt2aws.sizing import catalog, pricing
from pt2aws.sizing.pricing import CATALOG_REGION
from pt2aws.sizing.workload import ModelSpec, model_spec
from pt2aws.train.throughput import training_flops_per_token

#: Utilisation of rows without a measured anchor (GPUs, Trainium): our assumption.
ASSUMED_UTILISATION = 0.10
#: Notebook 03's SageMaker endpoints: Graviton2/3/4 and a comparable x86 instance.
DEFAULT_COMPARISON = ("ml.c6g.xlarge", "ml.c7g.xlarge", "ml.c8g.xlarge", "ml.c6i.xlarge")
#: A request this many times smaller than its anchor's is overhead-bound: an upper bound (ours).
SMALL_REQUEST = 10
#: Texts per forward pass of notebook 02's throughput table.
MEASURED_BATCH = 32


def flops_per_request(spec: ModelSpec, tokens: float) -> float:
    """FLOPs of one request of ``tokens`` tokens: ``(2N + 4LdT) x T``, a third of training's."""
    n, layers, width = spec.non_embedding_parameters, spec.num_layers, spec.hidden_size
    return training_flops_per_token(n, layers, width, tokens) / 3 * tokens


def published_anchor(processor: str) -> dict:
    """``{"utilisation", "flops_per_request", "anchor", "anchor_detail"}`` of AWS's published
    figure for ``"Graviton3"`` or ``"Inferentia2"`` (the catalog's ``serving_anchors``)."""
    a = catalog.data()["serving_anchors"][processor]
    shape = ModelSpec(
        a["model"], a["non_embedding_parameters"], a["hidden_size"], a["num_layers"], 1
    )
    rate = a.get("inferences_per_s") or a["batch"] / a["seconds_per_batch"]
    achieved = rate * flops_per_request(shape, a["tokens"])
    peak = catalog.peak_flops(a["instance"])
    src = catalog.source(a["source"])
    return {
        "utilisation": achieved / peak["flops"],
        "flops_per_request": achieved / rate,
        "anchor": f"AWS-published {processor} figure",
        "anchor_detail": f"{a['model']}, {a['tokens']} tokens, batch {a['batch']}, {rate:.1f}/s on "
        f"{a['instance']} ({a['what']}; {src['url'].split()[0]}, {src['date']}) = "
        f"{achieved / 1e9:.4g} GFLOP/s of {peak['basis']}",
    }


def machine_peak(cpus: list[dict] | None = None, isa: str | None = None, vcpus: int | None = None):
    """This machine's fp32 peak ``{"flops", "basis"}``, or None (no clock in ``cpus``, default
    :func:`pt2aws.env.machine.cpuinfo`): a Graviton's from the catalog; x86: physical cores x
    FLOP/cycle of the ISA x ``cpu MHz``."""
    from pt2aws.env.machine import cpuinfo

    info, vcpus = ((cpuinfo() if cpus is None else cpus) or [{}])[0], vcpus or os.cpu_count() or 1
    graviton = catalog.processor_by_cpu_part(info.get("CPU part", ""))
    if graviton:
        return catalog.cpu_peak(graviton[0], vcpus)
    if not info.get("cpu MHz"):
        return None
    if isa is None:
        from pt2aws.env import cpu_features

        isa = cpu_features().isa
    table = catalog.data()["isa_fp32_flops_per_cycle"]
    per_cycle = table["AVX512"] if isa.startswith("AVX512") else table.get(isa, table["DEFAULT"])
    ghz = float(info["cpu MHz"]) / 1e3
    cores = vcpus / (int(info.get("siblings", 1)) / int(info.get("cpu cores", 1)))
    basis = f"{cores:g} cores x {per_cycle} fp32 FLOP/cycle ({isa}) x {ghz:.3g} GHz"
    return {"flops": cores * per_cycle * ghz * 1e9, "basis": basis}


def local_anchor(run, peak: dict | None = None) -> dict | None:
    """The anchor notebook 02 measured in ``run``: fp32 eager at batch 32 on the texts it timed
    (length-sorted, padded to each batch's longest) over ``peak`` (default :func:`machine_peak`);
    None before notebook 02 has run."""
    path = run.inference_metrics
    metrics = json.loads(path.read_text()) if path.is_file() else {}
    eager = next((r for r in metrics.get("variants", []) if r["variant"] == "eager"), None)
    peak = peak or machine_peak()
    if not eager or not peak or not run.model_dir.is_dir():
        return None
    from transformers import AutoConfig, AutoTokenizer

    from pt2aws.data import load_for_run, token_lengths

    count = metrics["agreement_texts"]["count"]
    texts = list(load_for_run(run.train_dir).splits["validation"]["text"][:count])
    tokenizer = AutoTokenizer.from_pretrained(run.model_dir)  # the timed texts were truncated
    lengths = sorted(min(n, tokenizer.model_max_length) for n in token_lengths(tokenizer, texts))
    spec = model_spec(AutoConfig.from_pretrained(run.model_dir))
    batches = [lengths[i : i + MEASURED_BATCH] for i in range(0, len(lengths), MEASURED_BATCH)]
    per_text = sum(len(b) * flops_per_request(spec, b[-1]) for b in batches) / len(lengths)
    achieved = eager["samples_per_s"] * per_text
    return {
        "utilisation": achieved / peak["flops"],
        "flops_per_request": per_text,
        "anchor": "this machine, notebook 02",
        "anchor_detail": f"fp32 eager, batch {MEASURED_BATCH}, {eager['samples_per_s']:.1f} texts/s "
        f"of {sum(lengths) / len(lengths):.0f} tokens ({path}) = "
        f"{achieved / 1e9:.4g} GFLOP/s of {peak['basis']}",
    }


def utilisation(instance_type: str, local: dict | None = None) -> dict:
    """The anchor of ``instance_type``'s row: arm64, AWS's published Graviton3 figure; x86,
    ``local`` (:func:`local_anchor`), else that figure as a stand-in; Inferentia2, AWS Neuron's
    figure; GPUs and Trainium, :data:`ASSUMED_UTILISATION`."""
    row = catalog.find(instance_type)
    kind = row.kind if row else "cpu"
    if kind == "inferentia":
        return published_anchor("Inferentia2")
    if kind != "cpu":
        assumed = f"{ASSUMED_UTILISATION:.0%} of peak"
        detail = f"no measured anchor for {row.accelerator}: {assumed} assumed"
        return {"utilisation": ASSUMED_UTILISATION, "anchor": f"assumption: {assumed}",
                "anchor_detail": detail}  # fmt: skip
    if catalog.architecture(instance_type) == "x86_64" and local:
        return local
    graviton = published_anchor("Graviton3")
    if catalog.architecture(instance_type) == "x86_64":
        graviton["anchor"] += " (stand-in: notebook 02 has not measured this machine)"
    return graviton


def _row(name, rate, anchor, basis, region, known=None, here=None) -> dict:
    """One cost row, the schema every table shows, for ``rate`` inferences/s; ``here``:
    ``(processor, arch, vcpus)`` of this machine (not an AWS instance: no price)."""
    usd = found = None
    aws = here is None
    if aws:  # an AWS instance: the catalog's facts, the price's cost
        hours = 1e6 / (rate * 3600)
        usd, found = pricing.instance_cost(name, None, hours, region=region, known=known)
        row = catalog.find(name)
        processor = (row and row.accelerator) or catalog.family_processor(name) or ""
        here = processor, catalog.architecture(name), catalog.instance_vcpus(name)
    return {
        "instance": name,
        **dict(zip(("processor", "arch", "vcpus"), here, strict=True)),
        "inferences_per_s": rate,
        "usd_per_hour": found and found.usd_per_hour,
        "usd_per_1m": usd,
        "price": found.describe() if found else "no price known" if aws else "not an AWS instance",
        "anchor": anchor["anchor"],
        "anchor_detail": anchor["anchor_detail"],
        "basis": basis,
    }


def cost_rows(
    model, tokens, instances=DEFAULT_COMPARISON, *, region=CATALOG_REGION, prices=None, local=None
):
    """The row of each of ``instances`` with a known peak serving ``model`` at ``tokens`` tokens
    per request (``prices``: live ones by instance, else the table's)."""
    rows, flops = [], flops_per_request(model, tokens)
    for name in instances:
        if (peak := catalog.peak_flops(name)) is None:
            continue
        u = utilisation(name, local)
        basis = f"{peak['basis']} x {u['utilisation']:.1%} / {flops / 1e9:.3g} GFLOP per request ({tokens} tokens)"
        if flops < u.get("flops_per_request", 0) / SMALL_REQUEST:  # overhead, not FLOPs, bounds it
            basis += (
                f", {u['flops_per_request'] / flops:.0f}x fewer than the anchor's: an upper bound"
            )
        rate, known = peak["flops"] * u["utilisation"] / flops, (prices or {}).get(name)
        rows.append(_row(name, rate, u, basis, region, known))
    return rows


def load_test_row(record: dict, request_tokens: float, region=CATALOG_REGION, prices=None):
    """The row notebook 03's load test measured (the deployed instance on AWS, *this machine*
    on the emulator), or None; ``request_tokens``: mean tokens of its requests."""
    load = record.get("load_test") or {}
    if not load.get("requests"):
        return None
    what = f"{load['requests']} requests of one text, {request_tokens:.0f} tokens on average"
    if record["target"] == "aws":
        name, here, how = record["instance_type"], None, f"load test on the endpoint, {what}"
    else:
        from pt2aws.env.machine import cpu_name

        here = cpu_name(), os.uname().machine, os.cpu_count()
        name = f"this machine ({here[0]}, {here[2]} vCPUs)"
        how = f"load test through {record['answer_source']}, {what}"
    measured = {"anchor": "measured: load test", "anchor_detail": how}
    known = (prices or {}).get(name)
    return _row(name, load["throughput_per_s"], measured, how, region, known, here)


def batched_vs_single(metrics_path: str | Path, load_test: dict | None, image: str | None) -> str:
    """Notebook 02's batch-32 throughput of the variant an endpoint on ``image`` serves (02's
    ``auto`` on ``custom``, else the DLC handler's ``eager``) beside the load test's."""
    path = Path(metrics_path)
    metrics = json.loads(path.read_text()) if path.is_file() else {}
    auto = (metrics.get("auto_variant") or {}).get("variant") if image == "custom" else None
    variant = auto or "eager"
    row = next((r for r in metrics.get("variants", []) if r["variant"] == variant), None)
    if not row or not (load_test or {}).get("requests"):
        return "no batched figure: run notebook 02 (and a load test) first"
    batched, single = row["samples_per_s"], load_test["throughput_per_s"]
    return (
        f"batched {variant} in one process (notebook 02, batch {MEASURED_BATCH}): {batched:.1f}/s; "
        f"one text per request through the serving stack (the load test): {single:.1f}/s: "
        f"{batched / single:.1f}x"
    )
