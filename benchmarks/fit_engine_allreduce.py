"""Fit the roofline's all-reduce term to measured all-reduce tables, per engine and GPU family.

The engines' all-reduce (vLLM's and SGLang's custom one-shot/two-shot kernels, TensorRT-LLM's
own kernels) is measured operator by operator in aiconfigurator-core's perf database
(``systems/data/<system>/comm/<engine>/<version>/custom_allreduce_perf.parquet``; NCCL in
``comm/nccl/<version>/nccl_perf.parquet``).  This script fits the roofline's ring model

    t = latency + 2 (n - 1) / n * bytes / (link_bw * bw_eff)

(``estimators/_roofline.py``) to those tables, by least squares on log(predicted / measured)
over 2, 4 and 8 GPUs and messages of 1 KiB to 128 MiB (one token's hidden state to an 8192-token
prefill chunk of a 8192-wide model), and prints the ``allreduce`` entries of
``estimators/data/engines.yaml``.  ``message_size`` in the tables counts bf16 elements.

    python benchmarks/fit_engine_allreduce.py            # needs `pip install llmcap[aic]`
"""

from __future__ import annotations

import sys
from importlib import resources
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.optimize import minimize

from sku_catalog import load_catalog

SYSTEMS = {"a100_sxm": "a100-80gb", "h100_sxm": "h100-sxm", "h200_sxm": "h200", "b200_sxm": "b200"}
# the table of each engine profile (the version nearest the profile's that the package holds);
# CUDA-graph kernels where the table has both (decode runs as graphs; prefill messages are
# large enough that the latency term does not matter)
TABLES = {
    "vllm": ("vllm", ("0.14.0", "0.19.0"), "vllm_graph"),
    "sglang": ("sglang", ("0.5.6.post2", "0.5.9", "0.5.10"), None),
    "trtllm": ("trtllm", ("1.2.0rc5", "1.0.0"), None),
    "nccl": ("nccl", ("2.27.3", "2.26.2", "2.23"), None),
}
MIN_BYTES, MAX_BYTES = 1 << 10, 128 << 20


def _load(root: Path, system: str, engine: str) -> pd.DataFrame | None:
    folder, versions, backend = TABLES[engine]
    for version in versions:
        name = "nccl_perf.parquet" if engine == "nccl" else "custom_allreduce_perf.parquet"
        path = root / system / "comm" / folder / version / name
        if path.exists():
            df = pd.read_parquet(path)
            if engine == "nccl":
                df = df[(df.op_name == "all_reduce") & (df.nccl_dtype == "half")]
            if backend is not None and "backend" in df:
                df = df[df.backend == backend]
            df = df.assign(bytes=df.message_size * 2.0, source=f"{folder}/{version}")
            return df[(df.bytes >= MIN_BYTES) & (df.bytes <= MAX_BYTES) & (df.num_gpus > 1)]
    return None


def fit(df: pd.DataFrame, link_bw: float) -> tuple[float, float, float]:
    """(latency_us, bw_eff, median |log error|) of the ring model on `df`."""
    n = df.num_gpus.to_numpy(float)
    b = df.bytes.to_numpy(float)
    t = df.latency.to_numpy(float) * 1e-3  # ms -> s

    def loss(x: np.ndarray) -> float:
        lat, eff = np.exp(x)
        pred = lat + 2 * (n - 1) / n * b / (link_bw * eff)
        return float(np.mean(np.log(pred / t) ** 2))

    res = minimize(loss, np.log([10e-6, 0.8]), method="Nelder-Mead")
    lat, eff = np.exp(res.x)
    pred = lat + 2 * (n - 1) / n * b / (link_bw * eff)
    return lat * 1e6, eff, float(np.median(np.abs(np.log(pred / t))))


def main() -> int:
    try:
        root = Path(str(resources.files("aiconfigurator_core"))) / "systems" / "data"
    except ModuleNotFoundError:
        print("needs aiconfigurator-core: pip install 'llmcap[aic]'", file=sys.stderr)
        return 2
    catalog = load_catalog()
    for engine in TABLES:
        for system, sku_id in SYSTEMS.items():
            df = _load(root, system, engine)
            if df is None or df.empty:
                print(f"{engine:7s} {system:9s} no table")
                continue
            sku = catalog.get(sku_id)
            link = sku.nodes[0].intra_node_bandwidth_gbps * 1e9
            lat, eff, err = fit(df, link)
            print(
                f"{engine:7s} {system:9s} ({sku.architecture}) {df.source.iloc[0]:22s} "
                f"latency_us: {lat:6.2f}  bw_eff: {eff:5.3f}  (median |log err| {err:.3f}, "
                f"{len(df)} points)"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
