"""``summary.md``: the key figures of a run folder (``make run``), one function per notebook;
a stage that did not run is reported as missing, not hidden."""

from __future__ import annotations

import json
from pathlib import Path

from pt2aws.rundir import RunDir

#: The training figures the summary lists, in order (keys of ``train/metrics.json``).
TRAINING_KEYS = (
    *("model_name_or_path", "num_parameters", "world_size", "train_steps", "train_runtime_s"),
    *("train_samples_per_second", "pad_fraction", "eval_accuracy", "eval_f1", "test_accuracy"),
    *("test_f1", "majority_baseline_accuracy"),
)


def _fmt(value, digits: int = 4) -> str:
    if value is None:
        return "n/a"
    return f"{value:.{digits}f}" if isinstance(value, float) else str(value)


def _table(header: str, rows: list[list]) -> list[str]:
    rule = " | ".join("---" for _ in header.split("|"))
    return [f"| {header} |", f"| {rule} |", *(f"| {' | '.join(map(str, r))} |" for r in rows)]


def _load(path: Path) -> dict | None:
    return json.loads(path.read_text()) if path.is_file() else None


def _environment(env: dict | None, sizing: dict | None) -> list[str]:
    lines = []
    if env:
        cpu = env.get("cpu") or {}
        lines += [
            "## Environment",
            f"- profile: `{env.get('profile')}`; torch {env.get('versions', {}).get('torch')}, "
            f"{env.get('accelerator', 'cpu')}; suggested instance: {env.get('suggested_instance')}",
        ]
        described = (cpu.get("features") or {}).get("description")
        if described:
            lines.append(f"- CPU: {described}; {cpu.get('logical_cores', '?')} logical cores")
        lines.append("")
    if sizing:
        choice, model, kind = sizing.get("recommended") or {}, sizing["model"], sizing["class"]
        lines += [
            "## Sizing (notebook 00)",
            f"- {model['name']}: {model['parameters']:,} parameters; workload class "
            f"**{kind['class']}** ({kind['strategy']})",
            f"- recommended: {choice.get('nodes', '?')} x `{choice.get('instance')}`; cheapest "
            f"`{sizing.get('cheapest')}`, fastest `{sizing.get('fastest')}` (estimates)",
            "",
        ]
    return lines


def _training(train: dict | None) -> list[str]:
    if not train:
        return ["## Fine-tuning: missing (train/metrics.json not found)", ""]
    rows = [[key, _fmt(train.get(key))] for key in TRAINING_KEYS]
    source = (train.get("data") or {}).get("source")
    if source:
        rows.insert(0, ["data", f"{source}, classes {', '.join(train.get('label_names', []))}"])
    flags = ", ".join(
        f"{k}={'on' if v['enabled'] else 'off'}" for k, v in train.get("flags", {}).items()
    )
    rows.append(["flags", flags])
    length = train.get("sequence_length")
    if length:
        served = f"train {length['train_max_length']}, serve {length['serve_max_length']} tokens"
        rows.append(["sequence length", served])
    return ["## Fine-tuning (notebook 01)", *_table("metric | value", rows), ""]


def _ab_and_job(ab: dict | None, job: dict | None) -> list[str]:
    lines = []
    if ab and ab.get("rows"):
        header = "variant | samples/s | vs baseline | vs Trainer | final loss"
        rows = [
            [r["variant"], _fmt(r.get("samples_per_s"), 1), _fmt(r.get("vs_baseline"), 2)]
            + [_fmt(r.get("vs_trainer"), 2), _fmt(r.get("final_loss"))]
            for r in ab["rows"]
        ]
        lines += [f"## Training speed A/B (notebook 01; {ab.get('device')})", *_table(header, rows)]
        lines.append("")
    if job:
        status = (job.get("final") or {}).get("status", job.get("status"))
        image = job.get("spec", {}).get("image_uri")
        lines += [
            f"- SageMaker training job ({job.get('target')}): `{job.get('name')}` {status}, "
            f"image `{image}`",
            "",
        ]
    return lines


def _inference(infer: dict | None) -> list[str]:
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
        best = f"{infer['best_variant']}: {speed} samples/s (batch 32)"
        rows.append(["best variant (>= 99% agreement)", best])
    left_out = [f"- {name} left out: {why}" for name, why in (infer.get("left_out") or {}).items()]
    return ["## Local inference (notebook 02)", *_table("metric | value", rows), "", *left_out, ""]


def _deployment(deploy: dict | None, cost_md: Path) -> list[str]:
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
    if cost_md.is_file():
        lines += ["### Cost per 1M inferences", cost_md.read_text(), ""]
    return lines


def write_summary(run_dir: str | Path, timings_s: dict[str, float] | None = None) -> Path:
    """Write ``summary.md`` from ``run_dir`` and ``timings_s`` (seconds per notebook); its path."""
    run = RunDir(run_dir)
    lines = [f"# pt2aws run {run.root.name}", ""]
    sizing = (_load(run.recommendation_json) or {}).get("recommendation")
    lines += _environment(_load(run.env_json), sizing)
    lines += _training(_load(run.train_metrics))
    lines += _ab_and_job(_load(run.ab_json), _load(run.sagemaker_job_json))
    lines += _inference(_load(run.inference_metrics))
    lines += _deployment(_load(run.deploy_json), run.cost_md)
    if timings_s:
        rows = [[k, f"{v:.1f}"] for k, v in {**timings_s, "total": sum(timings_s.values())}.items()]
        lines += ["## Timings", *_table("notebook | seconds", rows), ""]
    plots = sorted(run.plots_dir.glob("*.png"))
    if plots:
        lines += ["## Plots", *(f"![{p.stem}](plots/{p.name})" for p in plots), ""]
    run.summary_md.write_text("\n".join(lines))
    return run.summary_md
