"""Fine-tune a sequence classifier: one process on CPU, or N GPUs/nodes under ``torchrun``.

Run it as::

    python -m pt2aws.train --profile smoke --output_dir runs/x/train            # 1 process
    torchrun --nproc_per_node 8 -m pt2aws.train --profile full --output_dir …   # 8 GPUs, DDP
    torchrun --nnodes 2 --nproc_per_node 8 --rdzv-backend c10d --rdzv-endpoint HOST:29400 \\
        -m pt2aws.train --profile full --resume auto --save_steps 200 …         # 2 nodes
    python -m pt2aws.train --config runs/x/train/train_config.json --max_steps 50  # a saved config

:class:`FineTune` is the recipe, stage by stage (torchtune's layout): set up the data and model,
compile and wrap them (:mod:`~pt2aws.train.recipe`), resume (:mod:`~pt2aws.train.checkpointing`),
train epoch by epoch (one :func:`~pt2aws.train.recipe.train_step` per optimizer step), evaluate,
check the replicas, save. After each step the loop calls one hook,
:class:`~pt2aws.train.monitor.StepMonitor`: throughput, progress, the loss log, the test fault
hook. Performance flags are printed once with their reasons (:mod:`~pt2aws.train.flags`).

Every rank runs the same number of steps (the data is split like ``DistributedSampler``, padded
to equal counts), so an uneven split cannot hang; evaluation counts each example exactly once.
Checkpoints every ``--save_steps`` and at the end; ``--resume auto`` continues from the newest
to the same losses as an uninterrupted run, also after ``torchrun --max-restarts``. Test hook:
``PT2AWS_FAIL_AT_STEP=N`` (:func:`pt2aws.train.monitor.maybe_fail`).

Outputs in ``--output_dir``: ``model/`` (``save_pretrained`` of the unwrapped, uncompiled model and
its tokenizer, with the label names), ``metrics.json``, ``train_log.jsonl`` (one line per
logging step), ``train_config.json`` (the resolved configuration) and ``checkpoints/``.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import sys
from pathlib import Path

import torch

from pt2aws.config import TrainConfig, saved_config_path
from pt2aws.data import parse_label_map, sequence_length_record, token_lengths
from pt2aws.env.machine import peak_memory_bytes
from pt2aws.modeling import model_max_tokens
from pt2aws.sizing.catalog import peak_bf16_flops
from pt2aws.train.checkpointing import resume, save_checkpoint, save_model
from pt2aws.train.distributed import (
    DistInfo,
    compute_cleanup,
    compute_init,
    epoch_batches,
    replica_max_abs_diff,
)
from pt2aws.train.evaluation import evaluate
from pt2aws.train.flags import apply_tf32, autocast_dtype, resolve_flags
from pt2aws.train.inputs import load_data_and_model, tokenize_splits
from pt2aws.train.monitor import StepMonitor
from pt2aws.train.recipe import prepare_model_and_optimizer, train_step
from pt2aws.train.throughput import num_compiled_graphs

logger = logging.getLogger(__name__)


class FineTune:
    """The fine-tuning recipe on one rank. :meth:`run` reads as the algorithm.

    Args:
        cfg: the validated configuration.
        info: this rank, from :func:`pt2aws.train.distributed.compute_init`.
    """

    def __init__(self, cfg: TrainConfig, info: DistInfo):
        self.cfg, self.info = cfg, info
        self.out_dir = Path(cfg.output_dir)
        self.parallelism = cfg.parallelism if info.world_size > 1 else "none"

    def run(self) -> dict:
        """Train, evaluate and save; returns the metrics (rank 0; ``{}`` on other ranks)."""
        self._setup_flags()
        self._setup_data()
        self._setup_model_and_optimizer()
        self.state = resume(self.cfg, self.info, self.prep, self.scheduler)
        self._train()
        return self._finish()

    def _setup_flags(self) -> None:
        from transformers import set_seed

        if self.info.is_main:
            self.out_dir.mkdir(parents=True, exist_ok=True)
        set_seed(self.cfg.seed)
        self.flags = resolve_flags(self.cfg, self.info.device)
        if self.info.device.type == "cuda":
            apply_tf32(self.flags["tf32"].enabled)

    def _setup_data(self) -> None:
        """Load and tokenize the data (each split once); plan the epochs' batches."""
        import datasets
        from transformers import DataCollatorWithPadding

        datasets.disable_progress_bars()
        cfg = self.cfg
        self.data, self.tokenizer, self.model, self.flags["sdpa"] = load_data_and_model(cfg)
        self._print_header()
        self.rows = tokenize_splits(self.data, self.tokenizer, cfg.max_length)
        self.lengths = [len(r["input_ids"]) for r in self.rows["train"]]
        self.full_lengths = token_lengths(self.tokenizer, self.data.splits["train"]["text"])
        self.model_config = self.model.config
        # Batches are padded per batch: to a multiple of 8 on GPU or compiled, else to the longest
        pad_to = 8 if self.flags["pad_to_multiple_of_8"].enabled else None
        self.collator = DataCollatorWithPadding(
            self.tokenizer, pad_to_multiple_of=pad_to, return_tensors="pt"
        )
        self.steps_per_epoch = math.ceil(len(self._batches(0)) / cfg.gradient_accumulation_steps)
        self.total_steps = (
            cfg.max_steps
            if cfg.max_steps > 0
            else math.ceil(self.steps_per_epoch * cfg.num_train_epochs)
        )
        self.num_epochs = math.ceil(self.total_steps / self.steps_per_epoch)

    def _print_header(self) -> None:
        if not self.info.is_main:
            return
        parallelism = "none (1 process)" if self.parallelism == "none" else self.parallelism
        print(
            f"device={self.info.device} world_size={self.info.world_size} "
            f"parallelism={parallelism}",
            flush=True,
        )
        for name, choice in self.flags.items():
            print(f"{name}: {'on' if choice.enabled else 'off'} ({choice.reason})", flush=True)
        print(self.data.summary(), flush=True)
        length = self.data.stats.get("max_length_choice")
        print(length["describe"] if length else f"max_length {self.cfg.max_length} tokens (set)")

    def _batches(self, epoch: int) -> list[list[int]]:
        return epoch_batches(
            self.lengths,
            self.cfg.per_device_train_batch_size,
            world_size=self.info.world_size,
            rank=self.info.rank,
            seed=self.cfg.seed,
            epoch=epoch,
            bucketing=self.cfg.length_bucketing,
        )

    def _setup_model_and_optimizer(self) -> None:
        from transformers import get_linear_schedule_with_warmup

        cfg, info = self.cfg, self.info
        self.model.to(info.device)
        torch.manual_seed(cfg.seed + info.rank)  # same init everywhere, own dropout stream per rank
        self.compiled_before = num_compiled_graphs()
        self.amp = autocast_dtype(self.flags)
        self.prep = prepare_model_and_optimizer(
            self.model,
            info.device,
            parallelism=self.parallelism,
            compile_model=self.flags["torch_compile"].enabled,
            compile_mode=cfg.torch_compile_mode,
            amp_dtype=self.amp,
            fused_adamw=self.flags["fused_adamw"].enabled,
            learning_rate=cfg.learning_rate,
            weight_decay=cfg.weight_decay,
        )
        self.scheduler = get_linear_schedule_with_warmup(
            self.prep.optimizer, int(cfg.warmup_ratio * self.total_steps), self.total_steps
        )

    def _train(self) -> None:
        """The epoch loop: one :func:`train_step` per optimizer step, checkpoints, evaluation.

        Bookkeeping (throughput, progress, the loss log, the test fault hook) is the
        :class:`StepMonitor`'s, called once after each step.
        """
        cfg, state = self.cfg, self.state
        self.monitor = StepMonitor(
            cfg,
            self.info,
            state,
            self.total_steps,
            self.steps_per_epoch,
            self.scheduler,
            self.out_dir,
        )
        with self.monitor:
            self.prep.module.train()
            for epoch in range(state.epoch, self.num_epochs):
                if epoch > state.epoch:
                    state.epoch, state.batch_in_epoch = epoch, 0
                batches = self._batches(epoch)
                while state.batch_in_epoch < len(batches) and state.step < self.total_steps:
                    micro_batches = self._next_micro_batches(batches)
                    losses = train_step(self.prep, micro_batches, self.scheduler)
                    state.step += 1
                    self.monitor.after_step(micro_batches, losses)
                    if (cfg.save_steps and state.step % cfg.save_steps == 0) or (
                        state.step == self.total_steps
                    ):
                        with self.monitor.paused():
                            save_checkpoint(cfg, self.info, self.prep, self.scheduler, state)
                with self.monitor.paused():
                    if state.batch_in_epoch >= len(batches) or state.step >= self.total_steps:
                        self._evaluate_epoch()
            self.monitor.finish()

    def _next_micro_batches(self, batches: list[list[int]]) -> list[dict]:
        """The next ``gradient_accumulation_steps`` batches of this epoch, padded (on CPU)."""
        state = self.state
        group = batches[
            state.batch_in_epoch : state.batch_in_epoch + self.cfg.gradient_accumulation_steps
        ]
        state.batch_in_epoch += len(group)
        return [self.collator([self.rows["train"][j] for j in idx]) for idx in group]

    def _evaluate(self, split: str) -> dict:
        return evaluate(
            self.prep.module,
            self.rows[split],
            self.collator,
            self.info,
            self.cfg.per_device_eval_batch_size,
            self.amp,
            lockstep=self.parallelism == "fsdp",
        )

    def _evaluate_epoch(self) -> None:
        ev = self._evaluate("validation")
        self.state.history.append(
            {
                "epoch": self.state.epoch + 1,
                "step": self.state.step,
                **{f"eval_{k}": v for k, v in ev.items()},
            }
        )
        self.monitor.write(
            f"epoch {self.state.epoch + 1}: eval_loss={ev['loss']:.4f} "
            f"eval_accuracy={ev['accuracy']:.4f} ({ev['num_examples']} examples)"
        )

    def _finish(self) -> dict:
        """Throughput, test accuracy and the replica check (all ranks); rank 0 writes the run."""
        from pt2aws.modeling import count_parameters

        info, module = self.info, self.prep.module
        num_params = count_parameters(module)  # DTensor parameters report their global size
        # MFU against the peak of the precision the matmuls run in: the catalog has bf16 (and
        # fp16) peaks of GPUs; an fp32 run, or a CPU, has no catalogued peak, hence no MFU
        gpu = torch.cuda.get_device_name(info.device) if info.device.type == "cuda" else None
        peak = peak_bf16_flops(gpu) if gpu and self.amp is not None else None
        speed = self.monitor.meter.summary(info, module, self.model_config, peak)
        test = self._evaluate("test")
        replica_diff = None if self.parallelism == "fsdp" else replica_max_abs_diff(module, info)
        save_model(self.prep, self.tokenizer, self.out_dir, info)
        if not info.is_main:
            return {}
        metrics = self._metrics(num_params, speed, test, replica_diff)
        self.cfg.to_json(saved_config_path(self.out_dir))
        (self.out_dir / "metrics.json").write_text(json.dumps(metrics, indent=2))
        print(
            f"test_accuracy={test['accuracy']:.4f} "
            f"(majority baseline {metrics['majority_baseline_accuracy']:.4f}); "
            f"{metrics['train_samples_per_second']:.1f} samples/s steady, "
            f"pad_fraction={metrics['pad_fraction']:.3f}; saved {self.out_dir / 'model'}",
            flush=True,
        )
        return metrics

    def _metrics(self, num_params: int, speed: dict, test: dict, replica_diff) -> dict:
        cfg, info, history = self.cfg, self.info, self.state.history
        return {
            "profile": cfg.profile,
            "model_name_or_path": cfg.model_name_or_path,
            "num_parameters": num_params,
            "device": str(info.device),
            "world_size": info.world_size,
            "parallelism": self.parallelism,
            "flags": {k: dataclasses.asdict(v) for k, v in self.flags.items()},
            "train_steps": self.state.step,
            "resumed_from_step": self.state.resumed_from,
            **{k: v for k, v in speed.items() if k != "mfu"},
            "num_compiles": num_compiled_graphs() - self.compiled_before,
            "mfu": speed["mfu"],
            "peak_memory_bytes": peak_memory_bytes(info.device),
            "final_train_loss": self.monitor.last_loss,
            "replica_max_abs_diff": replica_diff,
            **{k: v for k, v in history[-1].items() if k.startswith("eval_")},
            **{f"test_{k}": v for k, v in test.items()},
            "majority_baseline_accuracy": self.data.majority_baseline("test"),
            "label_names": self.data.label_names,
            "data": self.data.stats,
            "sequence_length": sequence_length_record(
                train_max_length=cfg.max_length,
                model_max_tokens=model_max_tokens(self.model_config, self.tokenizer),
                train_lengths=self.full_lengths,
            ),
            "history": history,
        }


def parse_args(argv: list[str] | None = None) -> TrainConfig:
    """Parse ``--<field> <value>`` flags (one per :class:`TrainConfig` field) into a config.

    ``--config FILE.json`` reads a file written by :meth:`TrainConfig.to_json` (for example a
    run's ``train_config.json``, or the file :func:`pt2aws.train.launch.launch_training` writes):
    its values become the defaults, and every ``--<field>`` given as well, before or after it,
    overrides the file. A ``checkpoint_dir`` that the file derived from its ``output_dir``
    follows a new ``--output_dir``.

    Args:
        argv: the arguments; ``None``: ``sys.argv[1:]``.

    Returns:
        The validated config.

    Raises:
        FileNotFoundError: the ``--config`` file does not exist.
        ValueError: an unknown key in the file, or a value out of range.
        pt2aws.data.DataError: an unreadable ``--label_map``.
        SystemExit: an unknown flag (argparse prints the usage).
    """
    import argparse

    from transformers import HfArgumentParser

    argv = list(sys.argv[1:] if argv is None else argv)
    pre = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    pre.add_argument("--config", default=None)
    known, rest = pre.parse_known_args(argv)
    parser = HfArgumentParser(TrainConfig)
    parser.add_argument(
        "--config", default=None, help="a TrainConfig JSON file; --<field> flags override it"
    )
    if known.config:
        if not Path(known.config).is_file():
            raise FileNotFoundError(
                f"--config {known.config}: no such file; pass a run's train_config.json or a "
                "file written by TrainConfig.to_json"
            )
        saved = TrainConfig.from_json(known.config).to_dict()
        if saved["checkpoint_dir"] == str(Path(saved["output_dir"]) / "checkpoints"):
            saved["checkpoint_dir"] = None  # derived: re-derive from the final output_dir
        parser.set_defaults(**saved)
    cfg, _ = parser.parse_args_into_dataclasses(args=rest)
    parse_label_map(cfg.label_map)  # a bad --label_map fails here, before any model is loaded
    return cfg


def main(argv: list[str] | None = None) -> dict:
    """Entry point for ``python -m pt2aws.train`` and ``torchrun -m pt2aws.train``.

    Args:
        argv: command-line arguments (see :func:`parse_args`); ``None``: ``sys.argv[1:]``.

    Returns:
        The metrics dict written to ``metrics.json`` (empty on ranks other than 0).
    """
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    cfg = parse_args(argv)
    threads = torch.get_num_threads()  # compute_init sets its own; give in-process callers theirs
    info = compute_init(cfg.num_threads)
    succeeded = False
    try:
        metrics = FineTune(cfg, info).run()
        succeeded = True
        return metrics
    finally:
        compute_cleanup(info, succeeded=succeeded)
        torch.set_num_threads(threads)
