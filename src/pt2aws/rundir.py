"""The run folder: how notebooks pass state to each other, every path named once.

Layout of ``runs/<UTC timestamp>/`` (``make run``) or any folder a notebook's ``RUN_DIR`` names::

    env.json                 00  environment report
    recommendation.json      00  sizing, ranking and launch plan
    ec2/                     00  what the EC2 DLC route sent through SSM (its working files)
    train/                   01  model/, metrics.json, train_log.jsonl, train_config.json,
                                 checkpoints/, sagemaker_job.json, explained.json
    ab/ab.json               01  training speed A/B
    sagemaker_job/           01  the SageMaker training job's source, data channel, model
    inference/               02  metrics.json, model.tar.gz, serve/ (local endpoint logs)
    deploy/                  03  model.tar.gz, deploy.json, cost.md, serve/
    plots/*.png              every plot the notebooks draw
    notebooks/*.ipynb        the executed notebooks (``make run``)
    summary.md               key figures (``make run``; :mod:`pt2aws.report`)

Each notebook reads what an earlier one wrote through :class:`RunDir`, so a workshop can restart
at any step, and a missing file says which notebook writes it.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path

#: The link to the newest run (the notebooks' default ``RUN_DIR`` is ``../runs/latest``).
LATEST = "latest"
#: Which notebook writes the files under each top-level entry (for "run NN first" hints).
WRITERS = {
    "env.json": "00_instance_setup",
    "recommendation.json": "00_instance_setup",
    "ec2": "00_instance_setup",
    "train": "01_finetune_multi_gpu",
    "ab": "01_finetune_multi_gpu",
    "sagemaker_job": "01_finetune_multi_gpu",
    "inference": "02_local_inference",
    "deploy": "03_deploy_sagemaker_graviton",
}


@dataclass(frozen=True)
class RunDir:
    """Named paths of one run folder (nothing is created until something is written).

    Attributes:
        root: the run folder, e.g. ``runs/20261201-101500``.
    """

    root: Path

    def __init__(self, root: str | Path):
        object.__setattr__(self, "root", Path(root))

    @classmethod
    def new(cls, runs: str | Path = "runs") -> RunDir:
        """Create and return ``runs/<UTC timestamp>`` (``YYYYmmdd-HHMMSS``), and point
        ``runs/latest`` at it, the notebooks' default ``RUN_DIR``, so a notebook opened in
        JupyterLab after ``make run`` continues from that run.

        Raises:
            FileExistsError: a run of the same second exists.
        """
        path = Path(runs) / time.strftime("%Y%m%d-%H%M%S", time.gmtime())
        path.mkdir(parents=True, exist_ok=False)
        latest = Path(runs) / LATEST
        if latest.is_symlink() or not latest.exists():  # never replace a real folder
            latest.unlink(missing_ok=True)
            latest.symlink_to(path.name, target_is_directory=True)
        return cls(path)

    # notebook 00
    @property
    def env_json(self) -> Path:
        return self.root / "env.json"

    @property
    def recommendation_json(self) -> Path:
        return self.root / "recommendation.json"

    @property
    def ec2_dir(self) -> Path:
        """Working files of the EC2 Deep Learning Container route (section 6)."""
        return self.root / "ec2"

    # notebook 01
    @property
    def train_dir(self) -> Path:
        """``--output_dir`` of the training run."""
        return self.root / "train"

    @property
    def model_dir(self) -> Path:
        """The fine-tuned model and tokenizer (``save_pretrained``)."""
        return self.train_dir / "model"

    @property
    def train_metrics(self) -> Path:
        return self.train_dir / "metrics.json"

    @property
    def train_log(self) -> Path:
        return self.train_dir / "train_log.jsonl"

    @property
    def sagemaker_job_json(self) -> Path:
        return self.train_dir / "sagemaker_job.json"

    @property
    def explained_json(self) -> Path:
        """Notebook 01's lessons as measured: graphs, recompiles, DDP vs FSDP memory."""
        return self.train_dir / "explained.json"

    @property
    def sagemaker_job_dir(self) -> Path:
        """Working files of the SageMaker training job: source, data channel, fetched model."""
        return self.root / "sagemaker_job"

    @property
    def ab_dir(self) -> Path:
        return self.root / "ab"

    @property
    def ab_json(self) -> Path:
        return self.ab_dir / "ab.json"

    # notebook 02
    @property
    def inference_dir(self) -> Path:
        return self.root / "inference"

    @property
    def inference_metrics(self) -> Path:
        return self.inference_dir / "metrics.json"

    # notebook 03
    @property
    def deploy_dir(self) -> Path:
        return self.root / "deploy"

    @property
    def deploy_archive(self) -> Path:
        return self.deploy_dir / "model.tar.gz"

    @property
    def deploy_json(self) -> Path:
        return self.deploy_dir / "deploy.json"

    @property
    def cost_md(self) -> Path:
        return self.deploy_dir / "cost.md"

    @property
    def deploy_serve_dir(self) -> Path:
        return self.deploy_dir / "serve"

    # all notebooks
    @property
    def plots_dir(self) -> Path:
        return self.root / "plots"

    def plot(self, name: str) -> Path:
        """``plots/<name>.png`` (``name`` without the suffix)."""
        return self.plots_dir / f"{name.removesuffix('.png')}.png"

    @property
    def notebooks_dir(self) -> Path:
        return self.root / "notebooks"

    @property
    def summary_md(self) -> Path:
        return self.root / "summary.md"

    def writer_of(self, path: str | Path) -> str:
        """The notebook that writes ``path`` (a path inside this run folder)."""
        try:
            first = Path(path).resolve().relative_to(self.root.resolve()).parts[0]
        except (ValueError, IndexError):
            return "an earlier notebook"
        return WRITERS.get(first, "an earlier notebook")

    def require(self, path: str | Path) -> Path:
        """``path`` if it exists, else a FileNotFoundError naming the notebook to run first."""
        path = Path(path)
        if not path.exists():
            raise FileNotFoundError(
                f"{path} not found: run {self.writer_of(path)} first with RUN_DIR = "
                f"{str(self.root)!r}"
            )
        return path

    def read_json(self, path: str | Path) -> dict:
        """Read a JSON file of this run.

        Raises:
            FileNotFoundError: naming the notebook that writes it.
        """
        return read_json(self.require(path))

    def read_jsonl(self, path: str | Path) -> list[dict]:
        """Read a JSON Lines file of this run (one dict per non-empty line).

        Raises:
            FileNotFoundError: naming the notebook that writes it.
        """
        return read_jsonl(self.require(path))


def write_json(path: str | Path, data: dict) -> Path:
    """Write ``data`` as indented JSON, creating parent folders; returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, default=str))
    return path


def read_json(path: str | Path) -> dict:
    """Read a JSON file.

    Raises:
        FileNotFoundError: with a hint naming the notebook that writes it (when ``path`` lies in
            a run folder).
    """
    path = Path(path)
    if not path.is_file():
        writer = next(
            (nb for key, nb in WRITERS.items() if key in path.parts), "an earlier notebook"
        )
        raise FileNotFoundError(f"{path} not found: run {writer} first with the same RUN_DIR")
    return json.loads(path.read_text())


def read_jsonl(path: str | Path) -> list[dict]:
    """Read a JSON Lines file into a list of dicts."""
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
