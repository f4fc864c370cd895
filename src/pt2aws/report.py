"""``summary.md``: the key figures of a run folder, written at the end of ``make run``.

One function per notebook reads what it recorded (the JSON files of :class:`pt2aws.rundir.RunDir`)
and returns Markdown lines; a stage that did not run is reported as missing, not hidden.
"""

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
    """A Markdown table: ``header`` like ``"metric | value"``, one row per list of cells."""
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
        described = (cpu.get("features") or {}).get("description")  # cpu_features().description
        if described:
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
    rows = [[key, _fmt(train.get(key))] for key in TRAINING_KEYS]
    if (train.get("data") or {}).get("source"):
        rows.insert(
            0,
            [
                "data",
                f"{train['data']['source']}, classes {', '.join(train.get('label_names', []))}",
            ],
        )
    flags = train.get("flags", {}).items()
    rows.append(["flags", ", ".join(f"{k}={'on' if v['enabled'] else 'off'}" for k, v in flags)])
    length = train.get("sequence_length")
    if length:
        rows.append(
            [
                "sequence length",
                f"train {length['train_max_length']}, serve {length['serve_max_length']} tokens",
            ]
        )
    return ["## Fine-tuning (notebook 01)", *_table("metric | value", rows), ""]


def _ab_and_job(ab: dict | None, job: dict | None) -> list[str]:
    lines = []
    if ab and ab.get("rows"):
        rows = [
            [
                r["variant"],
                _fmt(r.get("samples_per_s"), 1),
                _fmt(r.get("vs_baseline"), 2),
                _fmt(r.get("vs_trainer"), 2),
                _fmt(r.get("final_loss")),
            ]
            for r in ab["rows"]
        ]
        header = "variant | samples/s | vs baseline | vs Trainer | final loss"
        lines += [
            f"## Training speed A/B (notebook 01; {ab.get('device')})",
            *_table(header, rows),
            "",
        ]
    if job:
        status = (job.get("final") or {}).get("status", job.get("status"))
        lines += [
            f"- SageMaker training job ({job.get('target')}): `{job.get('name')}` {status}, image "
            f"`{job.get('spec', {}).get('image_uri')}`",
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
        rows.append(
            [
                "best variant (>= 99% agreement)",
                f"{infer['best_variant']}: {speed} samples/s (batch 32)",
            ]
        )
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
    return lines + (
        ["### Cost per 1M inferences", cost_md.read_text(), ""] if cost_md.is_file() else []
    )


def write_summary(run_dir: str | Path, timings_s: dict[str, float] | None = None) -> Path:
    """Write ``summary.md`` with the key figures found in ``run_dir`` and ``timings_s`` (seconds
    per notebook, as ``make run`` measures them); returns its path."""
    run = RunDir(run_dir)
    lines = [f"# pt2aws run {run.root.name}", ""]
    sizing = (_load(run.recommendation_json) or {}).get("recommendation")
    lines += _environment(_load(run.env_json), sizing)
    lines += _training(_load(run.train_metrics))
    lines += _ab_and_job(_load(run.ab_json), _load(run.sagemaker_job_json))
    lines += _inference(_load(run.inference_metrics))
    lines += _deployment(_load(run.deploy_json), run.cost_md)
    if timings_s:
        rows = [[k, f"{v:.1f}"] for k, v in timings_s.items()] + [
            ["total", f"{sum(timings_s.values()):.1f}"]
        ]
        lines += ["## Timings", *_table("notebook | seconds", rows), ""]
    plots = sorted(run.plots_dir.glob("*.png"))
    if plots:
        lines += ["## Plots", *(f"![{p.stem}](plots/{p.name})" for p in plots), ""]
    run.summary_md.write_text("\n".join(lines))
    return run.summary_md
