"""What serving costs per 1M inferences: one throughput model for every row, fitted per processor
family to published figures of BERT-class encoders (``serving_anchors`` in ``instances.json``),
and the one cost-row schema of notebooks 00 and 03 and ``pt2aws recommend``::

    seconds per call of b texts of T tokens = L x overhead + b x FLOPs(T) / (peak x utilisation)
    FLOPs(T) = (2N + 4LdT) x T    (a third of training's 6N + 12LdT per token)

The overhead is per layer and call: at 8 tokens the 6-layer DistilBERT takes 0.55x the 12-layer
BERT-base's time on the same c6i.2xlarge (the Ice Lake anchors' source). Both parameters are
fitted by least squares on the relative error (linear in the overhead and 1 / utilisation); a
family with one published shape takes its overhead from the rule its entry states."""

from __future__ import annotations

import json
import os
from functools import cache
from pathlib import Path

import numpy as np

from pt2aws.sizing import catalog, pricing
from pt2aws.sizing.pricing import CATALOG_REGION
from pt2aws.sizing.workload import ModelSpec, model_spec
from pt2aws.train.throughput import training_flops_per_token

#: Utilisation of rows without a published anchor (GPUs, Trainium), no overhead: our assumption.
ASSUMED_UTILISATION = 0.10
#: Notebook 03's SageMaker endpoints: Graviton2/3/4 and comparable x86 instances.
DEFAULT_COMPARISON = (
    "ml.c6g.xlarge", "ml.c7g.xlarge", "ml.c8g.xlarge", "ml.c6i.xlarge", "ml.c7i.xlarge",
)  # fmt: skip
#: Texts per forward pass of notebook 02's throughput table.
MEASURED_BATCH = 32
#: The end of the ``anchor`` of a row without an overhead (GPUs, Trainium on an assumption;
#: Inferentia2's one published throughput): ranked after the others.
UPPER_BOUND = "an upper bound"


def flops_per_request(spec: ModelSpec, tokens: float) -> float:
    """FLOPs of one request of ``tokens`` tokens: ``(2N + 4LdT) x T``, a third of training's."""
    n, layers, width = spec.non_embedding_parameters, spec.num_layers, spec.hidden_size
    return training_flops_per_token(n, layers, width, tokens) / 3 * tokens


def _point(spec, lengths, batch: int, seconds: float, peak: float) -> tuple[float, float, float]:
    """``(layers x calls, FLOPs / peak, seconds)`` of texts of ``lengths`` tokens, ``batch`` per
    call (sorted, each call padded to its longest), that took ``seconds``."""
    lengths = sorted(lengths)
    calls = [lengths[i : i + batch] for i in range(0, len(lengths), batch)]
    flops = sum(len(c) * flops_per_request(spec, c[-1]) for c in calls)
    return spec.num_layers * len(calls), flops / peak, seconds


def fit(points, overhead: float | None = None) -> tuple[float, float]:
    """``(overhead s per layer and call, utilisation)`` of :func:`_point` triples, least squares
    on relative error with overhead >= 0 and utilisation <= 1 (the fp32 peak); ``overhead``
    given, or one point: only the utilisation (overhead 0 for one point)."""
    from scipy.optimize import lsq_linear

    units, work, seconds = (np.asarray(x, dtype=float) for x in zip(*points, strict=True))
    a, b = units / seconds, work / seconds  # a x overhead + b / utilisation = 1
    if overhead is not None or len(seconds) == 1:  # only 1 / utilisation, at least 1
        c = overhead or 0.0
        return c, 1 / max((b * (1 - a * c)).sum() / (b * b).sum(), 1.0)
    c, k = lsq_linear(np.column_stack([a, b]), np.ones(len(a)), bounds=([0, 1], np.inf)).x
    return round(float(c), 12), round(float(1 / k), 9)  # at a bound to the solver's tolerance


def seconds_per_call(f: dict, spec: ModelSpec, tokens: float, peak: float, batch: int = 1):
    """The model: seconds per call of ``batch`` texts of ``tokens`` under fit ``f``."""
    flops = batch * flops_per_request(spec, tokens)
    return spec.num_layers * f["overhead_s"] + flops / (peak * f["utilisation"])


def _anchor(a: dict) -> tuple[ModelSpec, float, float]:
    """An anchor's shape, peak FLOP/s (its ``vcpus`` where given) and seconds per call."""
    spec = ModelSpec(
        a["model"], a["non_embedding_parameters"], a["hidden_size"], a["num_layers"], 1
    )
    cpu = a["family"] in catalog.data()["cpus"]
    vcpus = a.get("vcpus") or catalog.instance_vcpus(a["instance"]) if cpu else None
    peak = catalog.cpu_peak(a["family"], vcpus) if cpu else catalog.peak_flops(a["instance"])
    return spec, peak["flops"], a.get("seconds_per_call") or a["batch"] / a["inferences_per_s"]


@cache
def family_fit(family: str) -> dict:
    """``{"family", "overhead_s", "utilisation", "anchors", "errors", "detail"}`` of one family's
    published anchors (``errors``: predicted / published, one per anchor). KeyError: no anchor."""
    conf = catalog.data()["serving_anchors"]
    anchors = [a for a in conf["anchors"] if a["family"] == family]
    rule = conf["families"][family]
    if not anchors:
        raise KeyError(f"no serving anchor for {family!r}")
    shaped = [_anchor(a) for a in anchors]
    points = [_point(s, [a["tokens"]] * a["batch"], a["batch"], t, p)
              for a, (s, p, t) in zip(anchors, shaped, strict=True)]  # fmt: skip
    fixed = rule.get("overhead_seconds_per_call")
    overhead = None if fixed is None else fixed / anchors[0]["num_layers"]
    f = dict(zip(("overhead_s", "utilisation"), fit(points, overhead), strict=True))
    f["errors"] = [seconds_per_call(f, s, a["tokens"], p, a["batch"]) / t
                   for a, (s, p, t) in zip(anchors, shaped, strict=True)]  # fmt: skip
    by_source = {}
    for a, (_, _, t), e in zip(anchors, shaped, f["errors"], strict=True):
        figure = f"{a['model']} {a['batch']} x {a['tokens']} tokens on {a['instance']}"
        by_source.setdefault(a["source"], []).append(f"{figure} {t * 1e3:.4g} ms: {e:.2f}")
    listed = "; ".join(
        f"{catalog.source(k)['url'].split()[0]} ({catalog.source(k)['date']}): {', '.join(v)}"
        for k, v in by_source.items()
    )
    how = f"; overhead: {rule['overhead_rule']}" if "overhead_rule" in rule else ""
    f["detail"] = (
        f"{f['overhead_s'] * 1e3:.3g} ms per layer and call + FLOPs / (peak x "
        f"{f['utilisation']:.1%}), {rule['configuration']}{how}; fitted to {len(anchors)} "
        f"published figure{'s' * (len(anchors) > 1)}, predicted / published: {listed}"
    )
    return {"family": family, "anchors": anchors, **f}


def row_fit(instance_type: str) -> dict:
    """The fit of ``instance_type``'s row with its ``anchor`` (label) and ``anchor_detail``:
    its family's, a stand-in's (``stand_ins``, said), or :data:`ASSUMED_UTILISATION`."""
    row = catalog.find(instance_type)
    kind = row.kind if row else "cpu"
    processor = "Inferentia2" if kind == "inferentia" else catalog.family_processor(instance_type)
    if kind not in ("cpu", "inferentia"):
        assumed = f"{ASSUMED_UTILISATION:.0%} of peak, no overhead"
        detail = f"no published anchor for {row.accelerator}: {assumed} assumed"
        return {"overhead_s": 0.0, "utilisation": ASSUMED_UTILISATION,
                "anchor": f"assumption: {assumed}: {UPPER_BOUND}", "anchor_detail": detail}  # fmt: skip
    stand_ins = catalog.data()["serving_anchors"]["stand_ins"]
    family = stand_ins.get(processor, processor)
    f = family_fit(family)
    n = len(f["anchors"])
    label = f"{family} fit, {n} published figure{'s' * (n > 1)}"
    if family != processor:
        label = f"{family} fit at the {processor} peak (no {processor} figure found)"
    label += f", no overhead: {UPPER_BOUND}" * (f["overhead_s"] == 0)
    return {**f, "anchor": label, "anchor_detail": f"{family} fit: {f['detail']}"}


def machine_peak(cpus: list[dict] | None = None, isa: str | None = None, vcpus: int | None = None):
    """This machine's fp32 peak ``{"flops", "basis", "processor"}``, or None (no clock in ``cpus``,
    default :func:`pt2aws.env.machine.cpuinfo`): a Graviton's from the catalog; x86: physical cores
    x FLOP/cycle of the ISA x ``cpu MHz`` (``processor`` ``"x86_64"``)."""
    from pt2aws.env.machine import cpuinfo

    info, vcpus = ((cpuinfo() if cpus is None else cpus) or [{}])[0], vcpus or os.cpu_count() or 1
    if graviton := catalog.processor_by_cpu_part(info.get("CPU part", "")):
        return {**catalog.cpu_peak(graviton[0], vcpus), "processor": graviton[0]}
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
    return {"flops": cores * per_cycle * ghz * 1e9, "basis": basis, "processor": "x86_64"}


def measured_fit(spec: ModelSpec, lengths: list[int], eager: dict, peak: dict, source: str):
    """This machine's fit to two fp32 eager measurements (``source`` names who took them):
    ``eager["p50_ms"]`` over the first ``eager["calls"]`` of the texts of ``lengths`` tokens one
    per call, ``eager["samples_per_s"]`` over all of them at :data:`MEASURED_BATCH`; ``check``:
    its family fit's prediction of both at ``peak`` beside them, ``prediction_ratios``."""
    median = np.median([flops_per_request(spec, n) for n in lengths[: eager["calls"]]])
    one = (spec.num_layers, median / peak["flops"], eager["p50_ms"] / 1e3)
    seconds = len(lengths) / eager["samples_per_s"]
    all_ = _point(spec, lengths, MEASURED_BATCH, seconds, peak["flops"])
    f = dict(zip(("overhead_s", "utilisation"), fit([one, all_]), strict=True))
    stand_ins = catalog.data()["serving_anchors"]["stand_ins"]
    family = stand_ins.get(peak["processor"], peak["processor"])
    g = family_fit(family)

    def predicted(units, work):
        return units * g["overhead_s"] + work / g["utilisation"]

    p50, rate, t1 = predicted(*one[:2]), len(lengths) / predicted(*all_[:2]), one[2]
    measured = eager["samples_per_s"]
    check = (
        f"model check: the {family} fit at this machine's peak ({peak['basis']}) predicts "
        f"{rate:.1f} texts/s at batch {MEASURED_BATCH} and a batch-1 p50 of {p50 * 1e3:.1f} ms; "
        f"measured {measured:.1f}/s and {t1 * 1e3:.1f} ms: predicted / measured "
        f"{rate / measured:.2f} and {p50 / t1:.2f}"
    )
    above = " (at the fp32 peak, its bound: this machine's batch-1 calls cost more than batching implies)"
    detail = (
        f"{f['overhead_s'] * 1e3:.3g} ms per layer and call + FLOPs / (peak x "
        f"{f['utilisation']:.1%}), fitted to the fp32 eager batch-1 p50 ({t1 * 1e3:.1f} ms, "
        f"{eager['calls']} texts) and batch-{MEASURED_BATCH} throughput ({measured:.1f} texts/s "
        f"of {np.mean(lengths):.0f} tokens) of {source}{above * (f['utilisation'] >= 1)}"
    )
    label = f"this machine, {source.split(' (')[0]}"
    return {**f, "peak": peak, "prediction_ratios": (rate / measured, p50 / t1), "check": check,
            "anchor": label, "anchor_detail": f"this machine: {detail}; {check}"}  # fmt: skip


def local_measurement(run, peak: dict | None = None) -> dict | None:
    """:func:`measured_fit` of notebook 02's eager row in ``run`` on the texts it timed (the
    validation split's first ``agreement_texts``, truncated as timed) over ``peak`` (default
    :func:`machine_peak`); None before notebook 02 has run or without a peak."""
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
    tokenizer = AutoTokenizer.from_pretrained(run.model_dir)
    lengths = [min(n, tokenizer.model_max_length) for n in token_lengths(tokenizer, texts)]
    spec = model_spec(AutoConfig.from_pretrained(run.model_dir))
    return measured_fit(spec, lengths, eager, peak, f"notebook 02 ({path})")


def _row(name, rate, anchor, basis, region, known=None, request=None) -> dict:
    """One cost row, the schema every table shows, for ``rate`` inferences/s of AWS instance
    ``name``, or of this machine where ``name`` is None (not an AWS instance: no price)."""
    usd = found = None
    aws = name is not None
    if aws:  # an AWS instance: the catalog's facts, the price's cost
        hours = 1e6 / (rate * 3600)
        usd, found = pricing.instance_cost(name, None, hours, region=region, known=known)
        row = catalog.find(name)
        processor = (row and row.accelerator) or catalog.family_processor(name) or ""
        here = processor, catalog.architecture(name), catalog.instance_vcpus(name)
    else:
        from pt2aws.env.machine import cpu_name

        here = cpu_name(), os.uname().machine, os.cpu_count()
        name = f"this machine ({here[0]}, {here[2]} vCPUs)"
    return {
        "instance": name,
        **dict(zip(("processor", "arch", "vcpus"), here, strict=True)),
        "inferences_per_s": rate,
        "usd_per_hour": found and found.usd_per_hour,
        "usd_per_1m": usd,
        "price": found.describe() if found else "no price known" if aws else "not an AWS instance",
        "anchor": anchor["anchor"],
        "anchor_detail": anchor["anchor_detail"],
        "request": request,
        "basis": basis,
    }


def _basis(f: dict, spec: ModelSpec, tokens: float, peak: dict) -> str:
    return (f"1 / ({spec.num_layers} layers x {f['overhead_s'] * 1e3:.3g} ms + "
            f"{flops_per_request(spec, tokens) / 1e9:.3g} GFLOP / ({peak['basis']} x "
            f"{f['utilisation']:.1%}))")  # fmt: skip


def cost_rows(
    model, tokens, instances=DEFAULT_COMPARISON, *, region=CATALOG_REGION, prices=None, local=None
):
    """The row of each of ``instances`` with a known peak serving ``model`` one text of
    ``tokens`` tokens per request (``prices``: live ones by instance, else the table's), then
    this machine's (``local``: :func:`local_measurement`) at the same request."""
    rows, spec = [], model_spec(model)
    request = f"1 text of {tokens:g} tokens per request, fp32 weights"
    for name in instances:
        if (peak := catalog.peak_flops(name)) is None:
            continue
        f = row_fit(name)
        rate = 1 / seconds_per_call(f, spec, tokens, peak["flops"])
        basis, known = _basis(f, spec, tokens, peak), (prices or {}).get(name)
        rows.append(_row(name, rate, f, basis, region, known, request=request))
    if local:
        rate = 1 / seconds_per_call(local, spec, tokens, local["peak"]["flops"])
        basis = _basis(local, spec, tokens, local["peak"])
        rows.append(_row(None, rate, local, basis, region, request=request))
    return rows


def published_comparison(rows: list[dict]) -> str | None:
    """One sentence: the rows' c7g and c6i cost per 1M beside AWS's published comparison
    (``published_comparison`` in the catalog), agreeing or not; None without both priced."""
    pub = catalog.data()["serving_anchors"]["published_comparison"]
    cost = {}
    for r in rows:
        if r["usd_per_1m"] is not None and r["anchor"] != "measured: load test":
            cost.setdefault(r["instance"].removeprefix("ml.").split(".")[0], r["usd_per_1m"])
    if pub["cheaper"] not in cost or pub["than"] not in cost:
        return None
    a, b, src = cost[pub["cheaper"]], cost[pub["than"]], catalog.source(pub["source"])
    said = f'AWS measured "{pub["claim"]}" ({src["url"].split()[0]}, {src["date"]})'
    if a < b:
        return (f"{said}; these rows agree: {pub['cheaper']} {a:.3g} vs {pub['than']} {b:.3g} USD "
                f"per 1M ({1 - a / b:.0%} less).")  # fmt: skip
    return (f"These rows disagree with the published comparison: {pub['cheaper']} {a:.3g} vs "
            f"{pub['than']} {b:.3g} USD per 1M here, where {said}; each family's fit keeps its "
            f"published configuration (the fit lines above).")  # fmt: skip


def load_test_row(record: dict, request_tokens: float, region=CATALOG_REGION, prices=None):
    """The row notebook 03's load test measured (the deployed instance on AWS, *this machine*
    on the emulator), or None; ``request_tokens``: mean tokens of its requests."""
    load = record.get("load_test") or {}
    if not load.get("requests"):
        return None
    what = f"{load['requests']} requests of one text, {request_tokens:.0f} tokens on average"
    if record["target"] == "aws":
        name, how = record["instance_type"], f"load test on the endpoint, {what}"
    else:  # the emulator: this machine
        name, how = None, f"load test through {record['answer_source']}, {what}"
    measured = {"anchor": "measured: load test", "anchor_detail": how}
    known = (prices or {}).get(name)
    return _row(name, load["throughput_per_s"], measured, how, region, known, request=what)


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
