"""``summary.md``: the key figures of a run folder (``make run``), a section per notebook; a stage
that did not run is reported as missing, not hidden. :func:`markdown_table` is the one Markdown
table writer."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path

from pt2aws.rundir import RunDir

#: The training figures the summary lists, in order (keys of ``train/metrics.json``).
TRAINING_KEYS = tuple("""model_name_or_path num_parameters world_size train_steps train_runtime_s
    train_samples_per_second pad_fraction eval_accuracy eval_f1 test_accuracy test_f1
    majority_baseline_accuracy""".split())  # fmt: skip


def markdown_table(header: Sequence, rows: Iterable[Sequence]) -> list[str]:
    """The lines of a Markdown table: ``header`` (column names) over ``rows``."""
    return [f"| {' | '.join(map(str, r))} |" for r in [header, ["---"] * len(header), *rows]]


def _fmt(value, digits: int = 4) -> str:
    if value is None:
        return "n/a"
    return f"{value:.{digits}f}" if isinstance(value, float) else str(value)


def _metrics(title: str, rows: list) -> list[str]:
    return [f"## {title}", *markdown_table(["metric", "value"], rows), ""]


def _load(path: Path) -> dict:
    return json.loads(path.read_text()) if path.is_file() else {}


def _environment(env: dict, sizing: dict | None) -> list[str]:
    lines = []
    if env:
        cpu, torch = env.get("cpu") or {}, env.get("versions", {}).get("torch")
        lines += ["## Environment", f"- profile: `{env.get('profile')}`; torch {torch}, "
                  f"{env.get('accelerator', 'cpu')}; suggested instance: {env.get('suggested_instance')}"]  # fmt: skip
        if described := (cpu.get("features") or {}).get("description"):
            lines.append(f"- CPU: {described}; {cpu.get('logical_cores', '?')} logical cores")
        lines.append("")
    if sizing:
        choice, model, kind = sizing.get("recommended") or {}, sizing["model"], sizing["class"]
        best = {m: r["instance"] for r in sizing.get("training", [])
                for m in ("cheapest", "fastest") if r[m]}  # fmt: skip
        lines += [
            "## Sizing (notebook 00)",
            f"- {model['name']}: {model['parameters']:,} parameters; workload class "
            f"**{kind['class']}** ({kind['strategy']})",
            f"- recommended: {choice.get('nodes', '?')} x `{choice.get('instance')}`; cheapest "
            f"`{best.get('cheapest')}`, fastest `{best.get('fastest')}` (estimates)",
            "",
        ]
    return lines


def _training(train: dict, ab: dict, job: dict) -> list[str]:
    if not train:
        lines = ["## Fine-tuning: missing (train/metrics.json not found)", ""]
    else:
        rows = [[key, _fmt(train.get(key))] for key in TRAINING_KEYS]
        if source := (train.get("data") or {}).get("source"):
            rows.insert(0, ["data", f"{source}, classes {', '.join(train.get('label_names', []))}"])
        flags = {k: "on" if v["enabled"] else "off" for k, v in train.get("flags", {}).items()}
        rows.append(["flags", ", ".join(f"{k}={v}" for k, v in flags.items())])
        if n := train.get("sequence_length"):
            served = f"train {n['train_max_length']}, serve {n['serve_max_length']} tokens"
            rows.append(["sequence length", served])
        lines = _metrics("Fine-tuning (notebook 01)", rows)
    if ab.get("rows"):
        header = ["variant", "samples/s", "vs baseline", "vs Trainer", "final loss"]
        rows = [[r["variant"], _fmt(r.get("samples_per_s"), 1), _fmt(r.get("vs_baseline"), 2),
                 _fmt(r.get("vs_trainer"), 2), _fmt(r.get("final_loss"))] for r in ab["rows"]]  # fmt: skip
        lines += [f"## Training speed A/B (notebook 01; {ab.get('device')})"]
        lines += [*markdown_table(header, rows), ""]
    if job:
        status = (job.get("final") or {}).get("status", job.get("status"))
        lines += [f"- SageMaker training job ({job.get('target')}): `{job.get('name')}` {status}, "
                  f"image `{job.get('spec', {}).get('image_uri')}`", ""]  # fmt: skip
    return lines


def _inference(infer: dict) -> list[str]:
    if not infer:
        return []
    rows = [
        ["test accuracy", _fmt(infer.get("accuracy"))],
        ["test macro F1", _fmt(infer.get("f1"))],
        ["majority-class baseline", _fmt(infer.get("majority_baseline_accuracy"))],
        ["test examples", infer.get("num_examples")],
        ["handler agrees with Predictor", infer.get("handler_agrees")],
    ]
    if infer.get("best_variant"):
        speed = _fmt(infer.get("throughput_samples_per_second"), 1)
        rows.append(["best variant (>= 99% agreement)", f"{infer['best_variant']}: {speed} "
                     "samples/s (batch 32)"])  # fmt: skip
    left_out = [f"- {name} left out: {why}" for name, why in (infer.get("left_out") or {}).items()]
    return [*_metrics("Local inference (notebook 02)", rows), *left_out, ""]


def _deployment(deploy: dict, cost_md: Path) -> list[str]:
    if not deploy:
        return []
    lines = [
        "## Deployment (notebook 03)",
        f"- target: **{deploy.get('target')}**; instance `{deploy.get('instance_type')}`",
        f"- image: `{deploy.get('image_uri')}`",
        f"- archive: {deploy.get('archive_bytes')} bytes, valid: {deploy.get('archive_valid')}",
        f"- resources left after clean-up: {deploy.get('resources_left')}",
        f"- answer from: {deploy.get('answer_source')}; matches the local handler: "
        f"{deploy.get('matches_local')}",
        "",
    ]
    cost = ["### Cost per 1M inferences", cost_md.read_text(), ""] if cost_md.is_file() else []
    return lines + cost


def write_summary(run_dir: str | Path, timings_s: dict[str, float] | None = None) -> Path:
    """Write ``summary.md`` from ``run_dir`` and ``timings_s`` (seconds per notebook); its path."""
    run = RunDir(run_dir)
    lines = [f"# pt2aws run {run.root.name}", ""]
    lines += _environment(_load(run.env_json), _load(run.recommendation_json).get("recommendation"))
    lines += _training(_load(run.train_metrics), _load(run.ab_json), _load(run.sagemaker_job_json))
    lines += _inference(_load(run.inference_metrics))
    lines += _deployment(_load(run.deploy_json), run.cost_md)
    if timings_s:
        rows = [[k, f"{v:.1f}"] for k, v in {**timings_s, "total": sum(timings_s.values())}.items()]
        lines += ["## Timings", *markdown_table(["notebook", "seconds"], rows), ""]
    if plots := sorted(run.plots_dir.glob("*.png")):
        lines += ["## Plots", *(f"![{p.stem}](plots/{p.name})" for p in plots), ""]
    run.summary_md.write_text("\n".join(lines))
    return run.summary_md
