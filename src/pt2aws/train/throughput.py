"""Training FLOPs, MFU and steady-state throughput (samples/s, real tokens/s, padding)."""

from __future__ import annotations

import torch

from pt2aws.train.distributed import DistInfo, all_reduce_sum


def training_flops_per_token(
    non_embedding_params: float, num_layers: int, hidden_size: int, seq_len: float
) -> float:
    """Training FLOPs per token, ``6·N + 12·L·d·T`` (``N`` non-embedding parameters, ``L`` layers,
    width ``d``, ``T`` padded tokens per sequence): Kaplan et al. 2020 §2.1, PaLM appendix B."""
    return 6.0 * non_embedding_params + 12.0 * num_layers * hidden_size * seq_len


def non_embedding_parameters(model: torch.nn.Module) -> int:
    """Parameters outside ``nn.Embedding`` tables (DTensors count their global size)."""
    embedding = sum(
        p.numel()
        for m in model.modules()
        if isinstance(m, torch.nn.Embedding)
        for p in m.parameters(recurse=False)
    )
    return sum(p.numel() for p in model.parameters()) - embedding


def num_compiled_graphs() -> int:
    """Graphs Dynamo compiled so far in this process (each recompile or graph break adds one)."""
    from torch._dynamo.utils import counters

    return int(counters["stats"]["unique_graphs"])


def summary(monitor, info: DistInfo, model, config, peak_flops: float | None) -> dict:
    """Throughput over all ranks (a collective) of a finished ``StepMonitor``, its warm-up steps
    left out unless the run was too short: samples and real tokens per second, pad fraction,
    FLOPs per token, MFU against ``peak_flops`` (one device; ``None``: no MFU)."""
    warm = monitor.warm if monitor.warm and monitor.steps_done > monitor.warm[2] else None
    warm_s, warm_counts = warm[:2] if warm else (0.0, [0, 0, 0])
    totals = all_reduce_sum(monitor.counts + warm_counts, info)
    time_s = monitor.runtime_s - warm_s
    tokens_per_s = (totals[1] - totals[4]) / time_s if time_s > 0 else 0.0
    flops_per_token = training_flops_per_token(
        non_embedding_parameters(model),
        config.num_hidden_layers,
        config.hidden_size,
        totals[2] / totals[0] if totals[0] else 0.0,
    )
    return {
        "train_runtime_s": monitor.runtime_s,
        "train_samples_per_second": (totals[0] - totals[3]) / time_s if time_s > 0 else 0.0,
        "train_tokens_per_second": tokens_per_s,
        "pad_fraction": 1.0 - totals[1] / totals[2] if totals[2] else 0.0,
        "flops_per_token": flops_per_token,
        "mfu": (
            flops_per_token * tokens_per_s / (peak_flops * info.world_size) if peak_flops else None
        ),
    }
