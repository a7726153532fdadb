"""All-reduce over several GPUs of one machine: torch.distributed (NCCL), one process per GPU.

Each TP degree ``n`` runs ``n`` processes (spawned: CUDA cannot be forked) that all-reduce
a bf16 buffer of each size ``warmup`` times, then ``repeats`` times, each timed alone with
CUDA events (`time_op`); a size's time is the slowest rank's median (the collective ends
when the last rank does).  Rank 0 writes the rows to a JSON file that the parent reads.
"""

from __future__ import annotations

import json
import socket
import tempfile
from pathlib import Path
from typing import Any

from estimators.profiler._kernels import time_op

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
    device: str,
) -> None:
    import torch
    import torch.distributed as dist

    if device == "cuda":
        torch.cuda.set_device(rank)
    dist.init_process_group(
        "nccl" if device == "cuda" else "gloo",
        init_method=f"tcp://127.0.0.1:{port}",
        rank=rank,
        world_size=world,
    )
    rows = []
    try:
        for nbytes in sizes:
            buf = torch.randn(nbytes // 2, device=device, dtype=torch.bfloat16)
            dist.barrier()
            # eager: every rank must capture a collective alike, so no CUDA graph here
            median, _ = time_op(
                torch, device, [lambda buf=buf: dist.all_reduce(buf)], warmup, repeats, graph=False
            )
            slowest = torch.tensor([median * 1e3], device=device)
            dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
            rows.append({"num_gpus": world, "message_bytes": nbytes, "latency_ms": slowest.item()})
    finally:
        dist.destroy_process_group()
    if rank == 0:
        Path(out).write_text(json.dumps(rows))


def measure_allreduce(
    torch: Any, world: int, sizes: list[int], warmup: int, repeats: int, device: str = "cuda"
) -> list[dict[str, Any]]:
    """Rows (num_gpus, message_bytes, latency_ms) of all-reduces over `world` GPUs (NCCL);
    ``device="cpu"`` runs `world` CPU processes over gloo instead (for tests)."""
    import torch.multiprocessing as mp

    with tempfile.TemporaryDirectory() as tmp:
        out = str(Path(tmp) / "allreduce.json")
        mp.start_processes(
            _worker,
            args=(world, _free_port(), sizes, warmup, repeats, out, device),
            nprocs=world,
            join=True,
            start_method="spawn" if device == "cuda" else "fork",  # CUDA cannot be forked
        )
        rows = json.loads(Path(out).read_text())
    for row in rows:
        row["implementation"] = "nccl" if device == "cuda" else "gloo"
    return rows
