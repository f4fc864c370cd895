"""The run folder (``RUN_DIR``, ``runs/<UTC timestamp>/``): how notebooks pass state to each
other, every path named once in :data:`PATHS`; a missing file names the notebook that writes it."""

from __future__ import annotations

import json
import time
from pathlib import Path

from pt2aws.errors import MissingFileError

#: ``RunDir`` attribute -> path inside the run folder.
PATHS = {
    "env_json": "env.json",  # 00: environment report
    "recommendation_json": "recommendation.json",  # 00: sizing, ranking, launch plan
    "ec2_dir": "ec2",  # 00: what the EC2 DLC route sent through SSM
    "train_dir": "train",  # 01: the training run's --output_dir
    "model_dir": "train/model",  # 01: the fine-tuned model and tokenizer (save_pretrained)
    "train_metrics": "train/metrics.json",
    "train_log": "train/train_log.jsonl",
    "sagemaker_job_json": "train/sagemaker_job.json",
    "explained_json": "train/explained.json",  # 01: graphs, recompiles, DDP vs FSDP memory
    "sagemaker_job_dir": "sagemaker_job",  # 01: the job's source, data channel, fetched model
    "ab_dir": "ab",  # 01: training speed A/B
    "ab_json": "ab/ab.json",
    "inference_dir": "inference",  # 02: metrics, model.tar.gz, serve/ (local endpoint logs)
    "inference_metrics": "inference/metrics.json",
    "deploy_dir": "deploy",  # 03
    "deploy_archive": "deploy/model.tar.gz",
    "deploy_json": "deploy/deploy.json",
    "cost_md": "deploy/cost.md",
    "deploy_serve_dir": "deploy/serve",
    "plots_dir": "plots",  # every plot the notebooks draw
    "notebooks_dir": "notebooks",  # the executed notebooks (make run)
    "summary_md": "summary.md",  # key figures (make run; pt2aws.report)
}
#: Which notebook writes the files under each top-level entry (for "run NN first" hints).
WRITERS = {
    **dict.fromkeys(("env.json", "recommendation.json", "ec2"), "00_instance_setup"),
    **dict.fromkeys(("train", "ab", "sagemaker_job"), "01_finetune_multi_gpu"),
    "inference": "02_local_inference",
    "deploy": "03_deploy_sagemaker_graviton",
}


class RunDir:
    """Named paths of one run folder (``root``); nothing is created until something is written."""

    def __init__(self, root: str | Path):
        self.root = Path(root)

    def __getattr__(self, name: str) -> Path:
        if name not in PATHS:
            raise AttributeError(f"RunDir has no path {name!r}; known: {', '.join(PATHS)}")
        return self.root / PATHS[name]

    def __dir__(self):
        return [*super().__dir__(), *PATHS]

    def __repr__(self) -> str:
        return f"RunDir({str(self.root)!r})"

    @classmethod
    def new(cls, runs: str | Path = "runs") -> RunDir:
        """Create ``runs/<UTC YYYYmmdd-HHMMSS>`` and point ``runs/latest`` (the notebooks'
        default ``RUN_DIR``) at it; FileExistsError if a run of the same second exists."""
        path = Path(runs) / time.strftime("%Y%m%d-%H%M%S", time.gmtime())
        path.mkdir(parents=True, exist_ok=False)
        latest = Path(runs) / "latest"
        if latest.is_symlink() or not latest.exists():  # never replace a real folder
            latest.unlink(missing_ok=True)
            latest.symlink_to(path.name, target_is_directory=True)
        return cls(path)

    def plot(self, name: str) -> Path:  # plots/<name>.png
        return self.plots_dir / f"{name.removesuffix('.png')}.png"

    def require(self, path: str | Path) -> Path:
        """``path`` if it exists, else MissingFileError naming the notebook that writes it."""
        if Path(path).exists():
            return Path(path)
        try:
            first = Path(path).resolve().relative_to(self.root.resolve()).parts[0]
        except (ValueError, IndexError):
            first = ""
        writer = WRITERS.get(first, "an earlier notebook")
        raise MissingFileError(
            f"{path} not found: run {writer} first with RUN_DIR = {str(self.root)!r}"
        )

    def read_json(self, path: str | Path) -> dict:
        return json.loads(self.require(path).read_text())

    def read_jsonl(self, path: str | Path) -> list[dict]:
        """A JSON Lines file as a list of dicts (one per non-empty line)."""
        lines = self.require(path).read_text().splitlines()
        return [json.loads(line) for line in lines if line.strip()]


def write_json(path: str | Path, data: dict) -> Path:
    """Write ``data`` as indented JSON, creating parent folders; returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, default=str))
    return path
