"""Fine-tune a sequence classifier: one process on CPU, or N GPUs/nodes under ``torchrun``.

Run it as::

    python -m pt2aws.train --profile smoke --output_dir runs/x/train            # 1 process
    torchrun --nproc_per_node 8 -m pt2aws.train --profile full --output_dir …   # 8 GPUs, DDP
    torchrun --nnodes 2 --nproc_per_node 8 --rdzv-backend c10d --rdzv-endpoint HOST:29400 \\
        -m pt2aws.train --profile full --resume auto --save_steps 200 …         # 2 nodes
    python -m pt2aws.train --config runs/x/train/train_config.json --max_steps 50  # a saved config

:class:`FineTune` is the recipe, stage by stage (torchtune's layout): set up the data and model,
compile and wrap them (:mod:`~pt2aws.train.recipe`), resume (:mod:`~pt2aws.train.checkpointing`),
train epoch by epoch, evaluate, measure throughput (:mod:`~pt2aws.train.throughput`), check the
replicas, save. Performance flags are printed once with their reasons (:mod:`~pt2aws.train.flags`).

Every rank runs the same number of steps (the data is split like ``DistributedSampler``, padded
to equal counts), so an uneven split cannot hang; evaluation counts each example exactly once.
Checkpoints every ``--save_steps`` and at the end; ``--resume auto`` continues from the newest
to the same losses as an uninterrupted run, also after ``torchrun --max-restarts``. Test hook:
``PT2AWS_FAIL_AT_STEP=N`` makes the last rank (or ``PT2AWS_FAIL_RANK``) die right after step N
on the first attempt only: ``os._exit(1)`` under torchrun, a ``RuntimeError`` in-process.

Outputs in ``--output_dir``: ``model/`` (``save_pretrained`` of the unwrapped, uncompiled model and
its tokenizer, with the label names), ``metrics.json``, ``train_log.jsonl`` (one line per
logging step), ``train_config.json`` (the resolved configuration) and ``checkpoints/``.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import os
import sys
from pathlib import Path

import torch

from pt2aws.catalog import peak_bf16_flops
from pt2aws.config import TrainConfig, saved_config_path
from pt2aws.data import sequence_length_record, token_lengths
from pt2aws.modeling import model_max_tokens
from pt2aws.system import peak_memory_bytes
from pt2aws.train.checkpointing import open_train_log, resume, save_checkpoint, save_model
from pt2aws.train.distributed import (
    DistInfo,
    all_reduce_sum,
    compute_cleanup,
    compute_init,
    epoch_batches,
    replica_max_abs_diff,
)
from pt2aws.train.evaluation import evaluate
from pt2aws.train.flags import apply_tf32, autocast_dtype, resolve_flags
from pt2aws.train.inputs import load_data_and_model, tokenize_splits
from pt2aws.train.recipe import micro_step, optimizer_step, prepare_model_and_optimizer
from pt2aws.train.throughput import ThroughputMeter, num_compiled_graphs

logger = logging.getLogger(__name__)


def _maybe_fail(step: int, info: DistInfo) -> None:
    """The ``PT2AWS_FAIL_AT_STEP`` test hook (see the module docstring)."""
    fail_at = os.environ.get("PT2AWS_FAIL_AT_STEP")
    if not fail_at or int(fail_at) != step:
        return
    if os.environ.get("TORCHELASTIC_RESTART_COUNT", "0") != "0":
        return
    if info.rank != int(os.environ.get("PT2AWS_FAIL_RANK", info.world_size - 1)):
        return
    message = f"PT2AWS_FAIL_AT_STEP={step}: rank {info.rank} fails on purpose"
    if "TORCHELASTIC_RUN_ID" in os.environ:
        print(message, file=sys.stderr, flush=True)
        os._exit(1)
    raise RuntimeError(message)


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
        self.last_loss = float("nan")

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
        """The epoch loop: train steps, log, checkpoint, and evaluate at the end of each epoch."""
        from tqdm.auto import tqdm

        cfg, info, state = self.cfg, self.info, self.state
        self.meter = ThroughputMeter(info.device, cfg.benchmark_warmup_steps, state.step)
        log_file = None
        if info.is_main:
            log_file = open_train_log(self.out_dir / "train_log.jsonl", state.resumed_from)
        progress = tqdm(
            total=self.total_steps,
            initial=state.step,
            desc="train",
            disable=not info.is_main,
            mininterval=2.0,
        )
        self.meter.start()
        try:
            self.prep.module.train()
            for epoch in range(state.epoch, self.num_epochs):
                if epoch > state.epoch:
                    state.epoch, state.batch_in_epoch = epoch, 0
                batches = self._batches(epoch)
                while state.batch_in_epoch < len(batches) and state.step < self.total_steps:
                    self._train_step(batches)
                    progress.update(1)
                    _maybe_fail(state.step, info)
                    self.meter.step_done(state.step)
                    self._log_step(progress, log_file)
                    if (cfg.save_steps and state.step % cfg.save_steps == 0) or (
                        state.step == self.total_steps
                    ):
                        with self.meter.paused():
                            save_checkpoint(cfg, info, self.prep, self.scheduler, state)
                with self.meter.paused():
                    if state.batch_in_epoch >= len(batches) or state.step >= self.total_steps:
                        self._evaluate_epoch(progress)
            self.meter.stop()
        finally:
            progress.close()
            if log_file:
                log_file.close()

    def _train_step(self, batches: list[list[int]]) -> None:
        """One optimizer step over the next ``gradient_accumulation_steps`` batches."""
        state = self.state
        group = batches[
            state.batch_in_epoch : state.batch_in_epoch + self.cfg.gradient_accumulation_steps
        ]
        group_examples = sum(len(b) for b in group)
        for i, idx in enumerate(group):
            batch = self.collator([self.rows["train"][j] for j in idx])
            self.meter.count(batch)
            batch = {k: v.to(self.info.device, non_blocking=True) for k, v in batch.items()}
            loss = micro_step(
                self.prep, batch, weight=len(idx) / group_examples, last=i == len(group) - 1
            )
            state.loss_window[0] += loss.float()  # a tensor: no host sync per micro-step
            state.loss_window[1] += 1
        state.batch_in_epoch += len(group)
        optimizer_step(self.prep, self.scheduler)
        state.step += 1

    def _log_step(self, progress, log_file) -> None:
        """Every ``logging_steps``: log the mean loss over ranks and micro-batches since last."""
        state = self.state
        if state.step % self.cfg.logging_steps and state.step != self.total_steps:
            return
        window = state.loss_window
        total, n = all_reduce_sum([float(window[0]), float(window[1])], self.info)
        state.loss_window = [0.0, 0]
        self.last_loss = total / max(n, 1)
        record = {
            "step": state.step,
            "epoch": round(state.step / self.steps_per_epoch, 4),
            "loss": self.last_loss,
            "learning_rate": self.scheduler.get_last_lr()[0],
            "train_time_s": self.meter.elapsed(),
        }
        if log_file:
            log_file.write(json.dumps(record) + "\n")
            log_file.flush()
        progress.set_postfix(loss=f"{self.last_loss:.4f}")

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

    def _evaluate_epoch(self, progress) -> None:
        ev = self._evaluate("validation")
        self.state.history.append(
            {
                "epoch": self.state.epoch + 1,
                "step": self.state.step,
                **{f"eval_{k}": v for k, v in ev.items()},
            }
        )
        progress.write(
            f"epoch {self.state.epoch + 1}: eval_loss={ev['loss']:.4f} "
            f"eval_accuracy={ev['accuracy']:.4f} ({ev['num_examples']} examples)"
        )

    def _finish(self) -> dict:
        """Throughput, test accuracy and the replica check (all ranks); rank 0 writes the run."""
        from pt2aws.modeling import count_parameters

        info, module = self.info, self.prep.module
        num_params = count_parameters(module)  # DTensor parameters report their global size
        gpu = torch.cuda.get_device_name(info.device) if info.device.type == "cuda" else None
        speed = self.meter.summary(info, num_params, peak_bf16_flops(gpu) if gpu else None)
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
            "final_train_loss": self.last_loss,
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
