"""Fine-tune a sequence classifier on one process or under ``torchrun`` (:func:`main`): the
stages of :class:`FineTune`. Writes ``model/``, ``metrics.json``, ``train_log.jsonl``,
``train_config.json`` and ``checkpoints/`` into ``--output_dir``."""

from __future__ import annotations

import json
import logging
import math
import sys
from pathlib import Path

import torch

from pt2aws.config import TrainConfig, saved_config_path
from pt2aws.data import (
    choose_max_length,
    load_for_config,
    parse_label_map,
    sequence_length_record,
    token_lengths,
)
from pt2aws.env.machine import peak_memory_bytes
from pt2aws.modeling import count_parameters, load_tokenizer_and_model
from pt2aws.serving.handler import max_tokens
from pt2aws.sizing.catalog import peak_bf16_flops
from pt2aws.train import checkpoint, distributed, throughput
from pt2aws.train.distributed import DistInfo
from pt2aws.train.flags import Flag, apply_tf32, resolve_flags
from pt2aws.train.progress import StepMonitor
from pt2aws.train.recipe import prepare_model_and_optimizer, train_step


def load_data_and_model(cfg: TrainConfig):
    """``(data, tokenizer, model, sdpa_choice)`` as ``cfg`` names them (also for the HF Trainer
    peer), the model on CPU; ``max_length="auto"`` is chosen from the data and set in ``cfg``.
    Raises ``pt2aws.data.DataError``/``DataFileNotFoundError``: data the user must fix."""
    data = load_for_config(cfg.to_dict())
    auto, texts = cfg.max_length == "auto", data.splits["train"]["text"]
    tokenizer, model = load_tokenizer_and_model(
        cfg.model_name_or_path,
        data.label_names,
        train_texts=texts,
        max_length=None if auto else cfg.max_length,
    )
    if auto:
        limit = max_tokens(model.config, tokenizer)
        choice = choose_max_length(tokenizer, texts, model_max_tokens=limit)
        cfg.max_length = choice["max_length"]
        data.stats["max_length_choice"] = choice
    try:  # PyTorch's fused scaled_dot_product_attention where the model has it
        model.set_attn_implementation(cfg.attn_implementation)
        why = f"attn_implementation={model.config._attn_implementation!r}"
    except (ValueError, ImportError) as err:
        why = f"{type(model).__name__} refused {cfg.attn_implementation!r}: {err}"
    sdpa = Flag(getattr(model.config, "_attn_implementation", None) == "sdpa", why)
    if cfg.dropout is not None:
        for module in model.modules():
            if isinstance(module, torch.nn.Dropout):
                module.p = cfg.dropout
    return data, tokenizer, model, sdpa


def tokenize_splits(data, tokenizer, max_length: int) -> dict[str, list[dict]]:
    """``{split: [{"input_ids", "attention_mask", "labels"}, ...]}``, truncated, not padded."""
    encoded = data.splits.map(
        lambda batch: tokenizer(batch["text"], truncation=True, max_length=max_length),
        batched=True,
        remove_columns=["text"],
    ).rename_column("label", "labels")
    return {split: encoded[split].to_list() for split in encoded}


class FineTune:
    """The fine-tuning recipe on one rank; :meth:`run` reads as torchtune's stages."""

    def __init__(self, cfg: TrainConfig, info: DistInfo):
        self.cfg, self.info, self.out_dir = cfg, info, Path(cfg.output_dir)
        self.parallelism = cfg.parallelism if info.world_size > 1 else "none"

    def run(self) -> dict:
        """Train, evaluate and save; returns the metrics (rank 0; ``{}`` on other ranks)."""
        self._setup_data()
        self._setup_flags()
        self._setup_model_and_optimizer()
        self.state = checkpoint.resume(self.cfg, self.info, self.prep, self.scheduler)
        self._train()
        return self._finish()

    def _setup_data(self) -> None:
        """Load and tokenize the data (each split once); count the epochs' steps."""
        import datasets
        from transformers import set_seed

        datasets.disable_progress_bars()
        set_seed(self.cfg.seed)
        if self.info.is_main:
            self.out_dir.mkdir(parents=True, exist_ok=True)
        self.data, self.tokenizer, self.model, self.sdpa = load_data_and_model(self.cfg)
        self.rows = tokenize_splits(self.data, self.tokenizer, self.cfg.max_length)
        self.lengths = [len(r["input_ids"]) for r in self.rows["train"]]
        cfg, info = self.cfg, self.info
        self.steps_per_epoch = math.ceil(len(self._batches(0)) / cfg.gradient_accumulation_steps)
        epochs_steps = math.ceil(self.steps_per_epoch * cfg.num_train_epochs)
        self.total_steps = cfg.max_steps if cfg.max_steps > 0 else epochs_steps
        self.num_epochs = math.ceil(self.total_steps / self.steps_per_epoch)
        if info.is_main:
            where = f"device={info.device} world_size={info.world_size}"
            print(f"{where} parallelism={self.parallelism}", self.data.summary(), sep="\n")
            length = self.data.stats.get("max_length_choice")
            print(length["description"] if length else f"max_length {cfg.max_length} (set)")

    def _batches(self, epoch: int) -> list[list[int]]:
        return distributed.epoch_batches(
            self.lengths,
            self.cfg.per_device_train_batch_size,
            world_size=self.info.world_size,
            rank=self.info.rank,
            seed=self.cfg.seed,
            epoch=epoch,
            bucketing=self.cfg.length_bucketing,
        )

    def _collator(self, pad8: bool):
        from transformers import DataCollatorWithPadding

        return DataCollatorWithPadding(self.tokenizer, pad_to_multiple_of=8 if pad8 else None)

    def _setup_flags(self) -> None:
        """Every flag with its reason: rank 0 decides (measuring on CPU), every rank follows."""
        info = self.info

        def first_batches(pad8: bool) -> list[dict]:
            collate = self._collator(pad8)
            return [collate([self.rows["train"][j] for j in b]) for b in self._batches(0)[:4]]

        probe = {"model": self.model, "batches": first_batches} if info.is_main else {}
        flags = resolve_flags(self.cfg, info.device, **probe)
        self.flags = distributed.all_gather(flags, info)[0] | {"sdpa": self.sdpa}
        if info.device.type == "cuda":
            apply_tf32(self.flags["tf32"].enabled)
        self.collator = self._collator(self.flags["pad_to_multiple_of_8"].enabled)
        if info.is_main:
            for name, choice in self.flags.items():
                print(f"{name}: {'on' if choice.enabled else 'off'} ({choice.reason})", flush=True)

    def _setup_model_and_optimizer(self) -> None:
        from transformers import get_linear_schedule_with_warmup

        cfg, info = self.cfg, self.info
        self.model.to(info.device)
        torch.manual_seed(cfg.seed + info.rank)  # same init everywhere, own dropout stream per rank
        self.compiled_before = throughput.num_compiled_graphs()
        bf16, fp16 = self.flags["bf16"].enabled, self.flags["fp16"].enabled
        self.amp = torch.float16 if fp16 else torch.bfloat16 if bf16 else None
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
        """The epochs: :func:`train_step`, then the one hook; checkpoints, evaluation per epoch."""
        cfg, info, state, rows = self.cfg, self.info, self.state, self.rows["train"]
        self.monitor = StepMonitor(cfg, info, state, self.total_steps, self.steps_per_epoch)
        with self.monitor:
            self.prep.module.train()
            for epoch in range(state.epoch, self.num_epochs):
                if epoch > state.epoch:
                    state.epoch, state.batch_in_epoch = epoch, 0
                batches = self._batches(epoch)
                while state.batch_in_epoch < len(batches) and state.step < self.total_steps:
                    group = batches[state.batch_in_epoch :][: cfg.gradient_accumulation_steps]
                    state.batch_in_epoch += len(group)
                    micro_batches = [self.collator([rows[j] for j in g]) for g in group]
                    losses = train_step(self.prep, micro_batches, self.scheduler)
                    state.step += 1
                    self.monitor.after_step(micro_batches, losses, self.scheduler)
                    last = state.step == self.total_steps
                    if last or (cfg.save_steps and state.step % cfg.save_steps == 0):
                        with self.monitor.paused():
                            checkpoint.save_checkpoint(cfg, info, self.prep, self.scheduler, state)
                with self.monitor.paused():  # the epoch is done, or the steps are
                    ev = self._evaluate("validation")
                state.history.append({"epoch": epoch + 1, "step": state.step})
                state.history[-1].update({f"eval_{k}": v for k, v in ev.items()})
                self.monitor.write(
                    f"epoch {epoch + 1}: eval_loss={ev['loss']:.4f} "
                    f"eval_accuracy={ev['accuracy']:.4f} ({ev['num_examples']} examples)"
                )

    @torch.no_grad()
    def _evaluate(self, split: str) -> dict:
        """``{"loss", "accuracy", "f1", "num_examples"}`` of ``split``, each example counted once,
        the same on every rank (rank ``r`` takes ``r, r + world, ...``): mean cross-entropy in
        nats, accuracy, macro F1, in batches of similar length (less padding; the scores do not
        depend on the order). Under FSDP every rank runs as many forwards (padding ones)."""
        from pt2aws.metrics import classification_metrics

        info, model, size = self.info, self.prep.module, self.cfg.per_device_eval_batch_size
        examples = self.rows[split]
        mine = sorted(examples[info.rank :: info.world_size], key=lambda r: len(r["input_ids"]))
        batches = [mine[i : i + size] for i in range(0, len(mine), size)]
        if self.parallelism == "fsdp":
            needed = math.ceil(math.ceil(len(examples) / info.world_size) / size)
            batches += [None] * (needed - len(batches))
        model.eval()
        total_loss, preds, refs = 0.0, [], []
        for rows in batches:
            batch = {k: v.to(info.device) for k, v in self.collator(rows or examples[:1]).items()}
            with self.prep.autocast():
                out = model(**batch)
            if rows is not None:
                total_loss += float(out.loss) * len(rows)
                preds += out.logits.argmax(-1).tolist()
                refs += batch["labels"].tolist()
        model.train()
        losses, preds, refs = zip(*distributed.all_gather((total_loss, preds, refs), info))
        preds, refs = sum(preds, []), sum(refs, [])
        scores = classification_metrics(refs, preds, range(model.config.num_labels))
        scores["loss"] = sum(losses) / len(refs)
        return {k: scores[k] for k in ("loss", "accuracy", "f1", "num_examples")}

    def _finish(self) -> dict:
        """Throughput, test metrics, the replica check (all ranks); rank 0 writes the run."""
        cfg, info, module, monitor = self.cfg, self.info, self.prep.module, self.monitor
        # MFU against the peak of the precision the matmuls run in: the catalog has GPUs' bf16
        gpu = torch.cuda.get_device_name(info.device) if info.device.type == "cuda" else None
        peak = peak_bf16_flops(gpu) if gpu and self.amp is not None else None
        speed = throughput.summary(monitor, info, module, self.model.config, peak)
        test = self._evaluate("test")
        fsdp = self.parallelism == "fsdp"
        replica_diff = None if fsdp else distributed.replica_max_abs_diff(module, info)
        checkpoint.save_model(self.prep, self.tokenizer, self.out_dir, info)
        if not info.is_main:
            return {}
        history = self.state.history
        metrics = {
            "profile": cfg.profile,
            "model_name_or_path": cfg.model_name_or_path,
            "num_parameters": count_parameters(module),  # DTensors count their global size
            "device": str(info.device),
            "world_size": info.world_size,
            "parallelism": self.parallelism,
            "flags": {k: v._asdict() for k, v in self.flags.items()},
            "train_steps": self.state.step,
            "resumed_from_step": self.state.resumed_from,
            **speed,
            "num_compiles": throughput.num_compiled_graphs() - self.compiled_before,
            "peak_memory_bytes": peak_memory_bytes(info.device),
            "final_train_loss": monitor.last_loss,
            "replica_max_abs_diff": replica_diff,
            **{k: v for k, v in history[-1].items() if k.startswith("eval_")},
            **{f"test_{k}": v for k, v in test.items()},
            "majority_baseline_accuracy": self.data.majority_baseline("test"),
            "label_names": self.data.label_names,
            "data": self.data.stats,
            "sequence_length": sequence_length_record(
                train_max_length=cfg.max_length,
                model_max_tokens=max_tokens(self.model.config, self.tokenizer),
                train_lengths=token_lengths(self.tokenizer, self.data.splits["train"]["text"]),
            ),
            "history": history,
        }
        cfg.to_json(saved_config_path(self.out_dir))
        (self.out_dir / "metrics.json").write_text(json.dumps(metrics, indent=2))
        m = metrics
        print(
            f"test_accuracy={m['test_accuracy']:.4f} (majority baseline "
            f"{m['majority_baseline_accuracy']:.4f}); {m['train_samples_per_second']:.1f} samples/s"
            f" steady, pad_fraction={m['pad_fraction']:.3f}; saved {self.out_dir / 'model'}",
            flush=True,
        )
        return metrics


def parse_args(argv: list[str] | None = None) -> TrainConfig:
    """``--<field> <value>`` flags into a validated :class:`TrainConfig`; ``--config FILE.json``
    gives defaults they override. Raises FileNotFoundError (no such file), ValueError (unknown
    key, value out of range), ``pt2aws.data.DataError`` (an unreadable ``--label_map``)."""
    from transformers import HfArgumentParser

    argv = list(sys.argv[1:] if argv is None else argv)
    parser = HfArgumentParser(TrainConfig)
    parser.add_argument("--config", help="a TrainConfig JSON file; --<field> flags override it")
    config = parser.parse_known_args(argv)[0].config
    if config:
        if not Path(config).is_file():
            raise FileNotFoundError(f"--config {config}: no such file; pass a train_config.json")
        saved = TrainConfig.from_json(config).to_dict()
        if saved["checkpoint_dir"] == str(Path(saved["output_dir"]) / "checkpoints"):
            saved["checkpoint_dir"] = None  # derived: re-derive from the final output_dir
        parser.set_defaults(**saved)
    cfg, _ = parser.parse_args_into_dataclasses(args=argv)
    parse_label_map(cfg.label_map)  # a bad --label_map fails here, before any model is loaded
    return cfg


def main(argv: list[str] | None = None) -> dict:
    """``python -m pt2aws.train`` / ``torchrun -m pt2aws.train``: train; rank 0's metrics."""
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    cfg = parse_args(argv)
    threads = torch.get_num_threads()  # compute_init sets its own; give in-process callers theirs
    info = distributed.compute_init(cfg.num_threads)
    try:
        metrics = FineTune(cfg, info).run()
    finally:
        torch.set_num_threads(threads)
    distributed.compute_cleanup(info)  # not after a failure: the other ranks may be gone
    return metrics
