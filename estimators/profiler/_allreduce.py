"""All-reduce over several GPUs of one machine: torch.distributed (NCCL), one process per GPU.

Each TP degree ``n`` runs ``n`` processes (``torch.multiprocessing.spawn``) that all-reduce
a bf16 buffer of each size ``warmup`` times, then ``repeats`` times timed with CUDA events;
a size's time is the slowest rank's median (the collective ends when the last rank does).
Rank 0 writes the rows to a JSON file that the parent reads back.
"""

from __future__ import annotations

import json
import socket
import statistics
import tempfile
from pathlib import Path
from typing import Any

__all__ = ["measure_allreduce"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _worker(
    rank: int,
    world: int,
    port: int,
    sizes: list[int],
    warmup: int,
    repeats: int,
    out: str,
) -> None:  # pragma: no cover - runs only on a machine with several GPUs
    import torch
    import torch.distributed as dist

    torch.cuda.set_device(rank)
    dist.init_process_group(
        "nccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world
    )
    rows = []
    try:
        for nbytes in sizes:
            buf = torch.randn(nbytes // 2, device="cuda", dtype=torch.bfloat16)
            for _ in range(warmup):
                dist.all_reduce(buf)
            torch.cuda.synchronize()
            dist.barrier()
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            samples = []
            for _ in range(repeats):
                start.record()
                dist.all_reduce(buf)
                end.record()
                end.synchronize()
                samples.append(start.elapsed_time(end))
            slowest = torch.tensor([statistics.median(samples)], device="cuda")
            dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
            rows.append({"num_gpus": world, "message_bytes": nbytes, "latency_ms": slowest.item()})
    finally:
        dist.destroy_process_group()
    if rank == 0:
        Path(out).write_text(json.dumps(rows))


def measure_allreduce(
    torch: Any, world: int, sizes: list[int], warmup: int, repeats: int
) -> list[dict[str, Any]]:
    """Rows (num_gpus, message_bytes, latency_ms) of NCCL all-reduces over `world` GPUs."""
    import torch.multiprocessing as mp

    with tempfile.TemporaryDirectory() as tmp:
        out = str(Path(tmp) / "allreduce.json")
        mp.spawn(
            _worker,
            args=(world, _free_port(), sizes, warmup, repeats, out),
            nprocs=world,
            join=True,
        )
        rows = json.loads(Path(out).read_text())
    for row in rows:
        row["implementation"] = "nccl"
    return rows
