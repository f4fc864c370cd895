"""The run folder: where notebooks pass state to each other, and its summary.

Layout of ``runs/<UTC timestamp>/``::

    env.json                 notebook 00: environment report and suggested instance
    train/                   notebook 01: model/, metrics.json, train_log.jsonl, train_config.json
    inference/metrics.json   notebook 02: test accuracy/F1, confusion matrix, samples
    deploy/                  notebook 03: model.tar.gz, deploy.json (resources made and deleted)
    plots/*.png              every plot the notebooks draw
    notebooks/*.ipynb        the executed notebooks (``make run``)
    summary.md               key figures, written by ``make run``
"""

from __future__ import annotations

import json
import time
from pathlib import Path


def new_run_dir(root: str | Path = "runs") -> Path:
    """Create and return ``root/<UTC timestamp>`` (``YYYYmmdd-HHMMSS``)."""
    path = Path(root) / time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    path.mkdir(parents=True, exist_ok=False)
    return path


def write_json(path: str | Path, data: dict) -> Path:
    """Write ``data`` as indented JSON, creating parent folders; returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, default=str))
    return path


def read_json(path: str | Path) -> dict:
    """Read a JSON file.

    Raises:
        FileNotFoundError: with a hint about which notebook writes it.
    """
    path = Path(path)
    if not path.is_file():
        hint = {
            "train": "01_finetune_multi_gpu",
            "inference": "02_local_inference",
            "deploy": "03_deploy_sagemaker_graviton",
        }
        writer = next((nb for key, nb in hint.items() if key in path.parts), "an earlier notebook")
        raise FileNotFoundError(f"{path} not found: run {writer} first with the same RUN_DIR")
    return json.loads(path.read_text())


def read_jsonl(path: str | Path) -> list[dict]:
    """Read a JSON Lines file into a list of dicts."""
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]


def _fmt(value, digits: int = 4) -> str:
    if value is None:
        return "n/a"
    return f"{value:.{digits}f}" if isinstance(value, float) else str(value)


def write_summary(run_dir: str | Path, timings_s: dict[str, float] | None = None) -> Path:
    """Write ``summary.md`` with the key figures found in ``run_dir``; returns its path.

    Missing stages are reported as missing, not hidden.
    """
    run_dir = Path(run_dir)
    lines = [f"# pt2aws run {run_dir.name}", ""]

    def load(rel):
        p = run_dir / rel
        return json.loads(p.read_text()) if p.is_file() else None

    env, train, infer, deploy = (
        load("env.json"),
        load("train/metrics.json"),
        load("inference/metrics.json"),
        load("deploy/deploy.json"),
    )
    if env:
        lines += [
            "## Environment",
            f"- profile: `{env.get('profile')}`; torch {env.get('versions', {}).get('torch')}, "
            f"{env.get('accelerator', 'cpu')}; suggested instance: {env.get('suggested_instance')}",
            "",
        ]
    sizing = (load("recommendation.json") or {}).get("recommendation")
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
    ab = load("ab/ab.json")
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
    job = load("train/sagemaker_job.json")
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
        cost_md = run_dir / "deploy" / "cost.md"
        if cost_md.is_file():
            lines += ["### Cost per 1M inferences", cost_md.read_text(), ""]
    if timings_s:
        lines += ["## Timings", "| notebook | seconds |", "| --- | --- |"]
        lines += [f"| {k} | {v:.1f} |" for k, v in timings_s.items()]
        lines += [f"| total | {sum(timings_s.values()):.1f} |", ""]
    plots = sorted((run_dir / "plots").glob("*.png")) if (run_dir / "plots").is_dir() else []
    if plots:
        lines += ["## Plots"] + [f"![{p.stem}](plots/{p.name})" for p in plots] + [""]
    path = run_dir / "summary.md"
    path.write_text("\n".join(lines))
    return path
