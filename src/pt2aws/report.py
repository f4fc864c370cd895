"""``summary.md``: the key figures of a run folder, written at the end of ``make run``.

One function per notebook's section; each takes what that notebook recorded (the JSON files of
:class:`pt2aws.rundir.RunDir`) and returns Markdown lines. A stage that did not run is reported
as missing, not hidden.
"""

from __future__ import annotations

import json
from pathlib import Path

from pt2aws.rundir import RunDir

#: The training figures the summary lists, in order (keys of ``train/metrics.json``).
TRAINING_KEYS = (
    "model_name_or_path",
    "num_parameters",
    "world_size",
    "train_steps",
    "train_runtime_s",
    "train_samples_per_second",
    "pad_fraction",
    "eval_accuracy",
    "eval_f1",
    "test_accuracy",
    "test_f1",
    "majority_baseline_accuracy",
)


def _fmt(value, digits: int = 4) -> str:
    if value is None:
        return "n/a"
    return f"{value:.{digits}f}" if isinstance(value, float) else str(value)


def _load(path: Path) -> dict | None:
    return json.loads(path.read_text()) if path.is_file() else None


def _environment(env: dict | None, sizing: dict | None) -> list[str]:
    lines = []
    if env:
        lines += [
            "## Environment",
            f"- profile: `{env.get('profile')}`; torch {env.get('versions', {}).get('torch')}, "
            f"{env.get('accelerator', 'cpu')}; suggested instance: {env.get('suggested_instance')}",
        ]
        cpu = env.get("cpu") or {}
        described = (cpu.get("features") or {}).get("description")
        if described:  # pt2aws.env.cpu_features().description: what torch uses, caps included
            lines.append(f"- CPU: {described}; {cpu.get('logical_cores', '?')} logical cores")
        lines.append("")
    if sizing:
        choice = sizing.get("recommended") or {}
        lines += [
            "## Sizing (notebook 00)",
            f"- {sizing['model']['name']}: {sizing['model']['parameters']:,} parameters; workload "
            f"class **{sizing['class']['class']}** ({sizing['class']['strategy']})",
            f"- recommended: {choice.get('nodes', '?')} x `{choice.get('instance')}`; cheapest "
            f"`{sizing.get('cheapest')}`, fastest `{sizing.get('fastest')}` (estimates)",
            "",
        ]
    return lines


def _training(train: dict | None) -> list[str]:
    if not train:
        return ["## Fine-tuning: missing (train/metrics.json not found)", ""]
    lines = ["## Fine-tuning (notebook 01)", "| metric | value |", "| --- | --- |"]
    data = train.get("data") or {}
    if data.get("source"):
        lines.append(
            f"| data | {data['source']}, classes {', '.join(train.get('label_names', []))} |"
        )
    lines += [f"| {key} | {_fmt(train.get(key))} |" for key in TRAINING_KEYS]
    flags = ", ".join(
        f"{k}={'on' if v['enabled'] else 'off'}" for k, v in train.get("flags", {}).items()
    )
    lines.append(f"| flags | {flags} |")
    length = train.get("sequence_length")
    if length:
        lines.append(
            f"| sequence length | train {length['train_max_length']}, serve "
            f"{length['serve_max_length']} tokens |"
        )
    return lines + [""]


def _ab_and_job(ab: dict | None, job: dict | None) -> list[str]:
    lines = []
    if ab and ab.get("rows"):
        lines += [
            f"## Training speed A/B (notebook 01; {ab.get('device')})",
            "| variant | samples/s | vs baseline | vs Trainer | final loss |",
            "| --- | --- | --- | --- | --- |",
        ]
        lines += [
            f"| {r['variant']} | {_fmt(r.get('samples_per_s'), 1)} | {_fmt(r.get('vs_baseline'), 2)} "
            f"| {_fmt(r.get('vs_trainer'), 2)} | {_fmt(r.get('final_loss'))} |"
            for r in ab["rows"]
        ]
        lines.append("")
    if job:
        lines += [
            f"- SageMaker training job ({job.get('target')}): `{job.get('name')}` "
            f"{(job.get('final') or {}).get('status', job.get('status'))}, image "
            f"`{job.get('spec', {}).get('image_uri')}`",
            "",
        ]
    return lines


def _inference(infer: dict | None) -> list[str]:
    if not infer:
        return []
    lines = [
        "## Local inference (notebook 02)",
        "| metric | value |",
        "| --- | --- |",
        f"| test accuracy | {_fmt(infer.get('accuracy'))} |",
        f"| test macro F1 | {_fmt(infer.get('f1'))} |",
        f"| majority-class baseline | {_fmt(infer.get('majority_baseline_accuracy'))} |",
        f"| test examples | {infer.get('num_examples')} |",
        f"| handler agrees with Predictor | {infer.get('handler_agrees')} |",
    ]
    if infer.get("best_variant"):
        lines.append(
            f"| best variant (>= 99% agreement) | {infer['best_variant']}: "
            f"{_fmt(infer.get('throughput_samples_per_second'), 1)} samples/s (batch 32) |"
        )
    lines.append("")
    lines += [f"- {name} left out: {why}" for name, why in (infer.get("left_out") or {}).items()]
    return lines + [""]


def _deployment(deploy: dict | None, cost_md: Path) -> list[str]:
    if not deploy:
        return []
    lines = [
        "## Deployment (notebook 03)",
        f"- target: **{deploy.get('target')}**; instance `{deploy.get('instance_type')}`",
        f"- image: `{deploy.get('image_uri')}`",
        f"- archive: {deploy.get('archive_bytes')} bytes, valid: {deploy.get('archive_valid')}",
        f"- resources left after clean-up: {deploy.get('resources_left')}",
        f"- answer from: {deploy.get('answer_source')}; "
        f"matches the local handler: {deploy.get('matches_local')}",
        "",
    ]
    if cost_md.is_file():
        lines += ["### Cost per 1M inferences", cost_md.read_text(), ""]
    return lines


def _timings_and_plots(timings_s: dict[str, float] | None, plots_dir: Path) -> list[str]:
    lines = []
    if timings_s:
        lines += ["## Timings", "| notebook | seconds |", "| --- | --- |"]
        lines += [f"| {k} | {v:.1f} |" for k, v in timings_s.items()]
        lines += [f"| total | {sum(timings_s.values()):.1f} |", ""]
    plots = sorted(plots_dir.glob("*.png")) if plots_dir.is_dir() else []
    if plots:
        lines += ["## Plots"] + [f"![{p.stem}](plots/{p.name})" for p in plots] + [""]
    return lines


def write_summary(run_dir: str | Path, timings_s: dict[str, float] | None = None) -> Path:
    """Write ``summary.md`` with the key figures found in ``run_dir``; returns its path.

    Args:
        run_dir: the run folder.
        timings_s: seconds per notebook (``make run`` measures them), or None.
    """
    run = RunDir(run_dir)
    lines = [f"# pt2aws run {run.root.name}", ""]
    lines += _environment(
        _load(run.env_json), (_load(run.recommendation_json) or {}).get("recommendation")
    )
    lines += _training(_load(run.train_metrics))
    lines += _ab_and_job(_load(run.ab_json), _load(run.sagemaker_job_json))
    lines += _inference(_load(run.inference_metrics))
    lines += _deployment(_load(run.deploy_json), run.cost_md)
    lines += _timings_and_plots(timings_s, run.plots_dir)
    run.summary_md.write_text("\n".join(lines))
    return run.summary_md
