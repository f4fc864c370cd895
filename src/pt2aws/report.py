"""``summary.md``: the key figures of a run folder, written at the end of ``make run``."""

from __future__ import annotations

import json
from pathlib import Path

from pt2aws.rundir import RunDir


def _fmt(value, digits: int = 4) -> str:
    if value is None:
        return "n/a"
    return f"{value:.{digits}f}" if isinstance(value, float) else str(value)


def write_summary(run_dir: str | Path, timings_s: dict[str, float] | None = None) -> Path:
    """Write ``summary.md`` with the key figures found in ``run_dir``; returns its path.

    Missing stages are reported as missing, not hidden.
    """
    run = RunDir(run_dir)
    lines = [f"# pt2aws run {run.root.name}", ""]

    def load(path: Path) -> dict | None:
        return json.loads(path.read_text()) if path.is_file() else None

    env, train, infer, deploy = (
        load(run.env_json),
        load(run.train_metrics),
        load(run.inference_metrics),
        load(run.deploy_json),
    )
    if env:
        lines += [
            "## Environment",
            f"- profile: `{env.get('profile')}`; torch {env.get('versions', {}).get('torch')}, "
            f"{env.get('accelerator', 'cpu')}; suggested instance: {env.get('suggested_instance')}",
            "",
        ]
    sizing = (load(run.recommendation_json) or {}).get("recommendation")
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
    if train:
        lines += ["## Fine-tuning (notebook 01)", "| metric | value |", "| --- | --- |"]
        for key in (
            "model_name_or_path",
            "num_parameters",
            "world_size",
            "train_steps",
            "train_runtime_s",
            "train_samples_per_second",
            "eval_accuracy",
            "eval_f1",
            "test_accuracy",
            "test_f1",
            "majority_baseline_accuracy",
        ):
            lines.append(f"| {key} | {_fmt(train.get(key))} |")
        flags = ", ".join(
            f"{k}={'on' if v['enabled'] else 'off'}" for k, v in train.get("flags", {}).items()
        )
        lines += [f"| flags | {flags} |", ""]
    else:
        lines += ["## Fine-tuning: missing (train/metrics.json not found)", ""]
    ab = load(run.ab_json)
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
    job = load(run.sagemaker_job_json)
    if job:
        lines += [
            f"- SageMaker training job ({job.get('target')}): `{job.get('name')}` "
            f"{job.get('status')}, image `{job.get('spec', {}).get('image_uri')}`",
            "",
        ]
    if infer:
        lines += [
            "## Local inference (notebook 02)",
            "| metric | value |",
            "| --- | --- |",
            f"| test accuracy | {_fmt(infer.get('accuracy'))} |",
            f"| test macro F1 | {_fmt(infer.get('f1'))} |",
            f"| majority-class baseline | {_fmt(infer.get('majority_baseline_accuracy'))} |",
            f"| test examples | {infer.get('num_examples')} |",
            f"| handler agrees with Predictor | {infer.get('handler_agrees')} |",
            "",
        ]
    if deploy:
        lines += [
            "## Deployment (notebook 03)",
            f"- target: **{deploy.get('target')}**; instance `{deploy.get('instance_type')}`",
            f"- image: `{deploy.get('image_uri')}`",
            f"- archive: {deploy.get('archive_bytes')} bytes, valid: {deploy.get('archive_valid')}",
            f"- resources left after clean-up: {deploy.get('resources_left')}",
            f"- answer from: {deploy.get('answer_source')}; "
            f"matches the local handler: {deploy.get('matches_local')}",
            "",
        ]
        if run.cost_md.is_file():
            lines += ["### Cost per 1M inferences", run.cost_md.read_text(), ""]
    if timings_s:
        lines += ["## Timings", "| notebook | seconds |", "| --- | --- |"]
        lines += [f"| {k} | {v:.1f} |" for k, v in timings_s.items()]
        lines += [f"| total | {sum(timings_s.values()):.1f} |", ""]
    plots = sorted(run.plots_dir.glob("*.png")) if run.plots_dir.is_dir() else []
    if plots:
        lines += ["## Plots"] + [f"![{p.stem}](plots/{p.name})" for p in plots] + [""]
    run.summary_md.write_text("\n".join(lines))
    return run.summary_md
