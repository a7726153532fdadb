"""Compare the roofline estimator with Vidur's measured operator tables (and fit it).

    python benchmarks/validate_roofline.py [--vidur-dir ../shared/data/vidur] [--fit] [--json]

For every Vidur GPU (a100 -> a100-80gb, h100 -> h100-sxm, a40 -> a40), every model
table and TP degree and every num_tokens row, it compares the roofline's
per-operator times with the measured medians; likewise all-reduce and send/recv
(profiling/network), FlashAttention prefill/decode (profiling_2024/a100/attention.csv)
and the per-iteration CPU overhead.  Errors are absolute percentage errors:
MAPE and median APE, over all rows and over rows with num_tokens >= 128 (network:
messages of >= 128 tokens x 4096 hidden = 512K fp16 elements).  "layer" is the sum of
one layer's token-level operators (both residual adds), "layer+ar" adds its two TP
all-reduces (measured: the node's all-reduce table interpolated at num_tokens x hidden).

With --fit, the constants are fitted per architecture family (ampere: a100 + a40,
hopper: h100), per SKU for the token-level groups where a family has several SKUs
with data, and written to estimators/data/roofline.yaml before validating.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np
import pandas as pd

from estimators import _calibration as cal
from estimators import _roofline
from estimators._roofline import (
    RooflineEstimator,
    load_roofline_constants,
)
from sku_catalog import load_catalog

ROOT = Path(__file__).resolve().parents[1]

YAML_PATH = ROOT / "estimators" / "data" / "roofline.yaml"
BIG_TOKENS = 128
BIG_ELEMS = 128 * 4096


def _ape(pred: np.ndarray, meas: np.ndarray) -> np.ndarray:
    return np.abs(pred - meas) / meas * 100.0


def _stats(ape: np.ndarray) -> dict[str, float]:
    if ape.size == 0:
        return {"n": 0, "mape": float("nan"), "median_ape": float("nan")}
    return {"n": int(ape.size), "mape": float(np.mean(ape)), "median_ape": float(np.median(ape))}


def _fmt(s: dict[str, float]) -> str:
    if not s["n"]:
        return f"{'-':>7} {'-':>7}"
    return f"{s['mape']:7.1f} {s['median_ape']:7.1f}"


def _family(sku) -> str:
    return sku.architecture or "default"


def _ar_interp(tables: list[cal.NetTable], n: int, elems: np.ndarray) -> np.ndarray | None:
    for t in tables:
        if t.collective == "all_reduce" and t.num_workers == n and t.intra_node:
            return np.exp(np.interp(np.log(elems), np.log(t.size), np.log(t.measured)))
    return None


def fit(vidur_dir: Path, skus: dict, command: str) -> None:
    families = dict.fromkeys(_family(skus[sku_id]) for sku_id in cal.VIDUR_GPU_TO_SKU.values())
    data = {fam: cal.load_family_data(vidur_dir, fam, skus) for fam in families}
    fitted = cal.fit_constants(data, progress=lambda message: print(message, file=sys.stderr))
    notes = [
        "Hopper has no attention or CPU table: it uses the A100-fitted (default) attention",
        "efficiencies and CPU overhead. Per-SKU entries refit the matmul and elementwise",
        "constants on that SKU's tables alone. allreduce.pcie_bw_eff and p2p.pcie_bw_eff",
        "(PCIe-only nodes) are not fitted (no such table): assumed fractions of the PCIe rate.",
    ]
    cal.write_constants_yaml(
        YAML_PATH, fitted.defaults, fitted.families, fitted.skus, command, notes
    )
    _roofline._data_yaml.cache_clear()
    _roofline._constants_for.cache_clear()
    print(f"wrote {YAML_PATH}", file=sys.stderr)


def validate(vidur_dir: Path, skus: dict) -> dict:
    report: dict = {}
    for gpu, sku_id in cal.VIDUR_GPU_TO_SKU.items():
        sku = skus[sku_id]
        consts = load_roofline_constants(sku)
        ops = cal.load_op_tables(vidur_dir, gpu, sku)
        nets = cal.load_net_tables(vidur_dir, gpu, sku)
        per_op: dict[str, dict[str, list[np.ndarray]]] = defaultdict(lambda: defaultdict(list))
        models = {}
        for t in ops:
            models[t.model_dir] = t.model_source
            pred = cal.predict_ops(t)
            big = t.num_tokens >= BIG_TOKENS
            mid = t.num_tokens >= 64
            for op, meas in t.measured.items():
                if op in pred:
                    a = _ape(pred[op], meas)
                    per_op[op]["all"].append(a)
                    per_op[op]["big"].append(a[big])
            p, m = cal.layer_sum(t)
            a = _ape(p, m)
            per_op["layer"]["all"].append(a)
            per_op["layer"]["big"].append(a[big])
            per_op["layer"]["ge64"].append(a[mid])
            key = f"layer[{t.model_dir.split('/')[-1]},tp{t.tp}]"
            per_op[key]["all"].append(a)
            per_op[key]["big"].append(a[big])
            per_op[key]["ge64"].append(a[mid])
            if t.tp > 1:
                elems = t.num_tokens * t.model.hidden_size
                ar_meas = _ar_interp(nets, t.tp, elems)
                if ar_meas is not None:
                    est = RooflineEstimator(t.model, sku, tp=t.tp)
                    ar_pred = est.all_reduce_time(2.0 * elems)
                    a = _ape(p + 2 * ar_pred, m + 2 * ar_meas)
                    per_op["layer+ar"]["all"].append(a)
                    per_op["layer+ar"]["big"].append(a[big])
                    per_op["layer+ar"]["ge64"].append(a[mid])
        for t in nets:
            pred = cal.predict_net(t, consts)
            a = _ape(pred, t.measured)
            big = t.size >= BIG_ELEMS
            where = "intra" if t.intra_node else "inter"
            key = f"{t.collective}[{t.node_name},n{t.num_workers},{where}]"
            per_op[key]["all"].append(a)
            per_op[key]["big"].append(a[big])
        for at in cal.load_attention_tables(vidur_dir, gpu, sku):
            pred = cal.predict_attention(at)
            ntok = np.array([b.num_tokens for b in at.batches])
            a = _ape(pred, at.measured)
            for name, sel in (("attn_prefill", at.is_prefill), ("attn_decode", ~at.is_prefill)):
                per_op[name]["all"].append(a[sel])
                per_op[name]["big"].append(a[sel & (ntok >= BIG_TOKENS)])
        cpu_path = vidur_dir / "profiling_2024" / gpu / "cpu_overheads.csv"
        if cpu_path.exists():
            bs, meas = cal.cpu_measured(pd.read_csv(cpu_path))
            pred = consts.cpu_base_ms * 1e-3 + consts.cpu_per_seq_ms * 1e-3 * bs
            a = _ape(pred, meas)
            per_op["cpu_overhead"]["all"].append(a)
            per_op["cpu_overhead"]["big"].append(a[bs >= BIG_TOKENS])
        report[sku_id] = {
            "gpu": gpu,
            "family": _family(sku),
            "models": models,
            "operators": {
                op: {k: _stats(np.concatenate(v)) for k, v in d.items()} for op, d in per_op.items()
            },
        }
    return report


def print_report(report: dict) -> None:
    for sku_id, r in report.items():
        print(f"\n=== {sku_id} (vidur '{r['gpu']}', family {r['family']}) ===")
        for m, src in r["models"].items():
            print(f"  model {m}: {src}")
        print(
            f"  {'operator':<52} {'rows':>6} {'MAPE':>7} {'MdAPE':>7} | {'rows':>6} "
            f"{'MAPE':>7} {'MdAPE':>7}   (all | num_tokens>=128)"
        )
        ops = r["operators"]
        order = [
            o for o in (*_roofline.OPERATOR_NAMES, "layer", "layer+ar", "cpu_overhead") if o in ops
        ]
        order += sorted(o for o in ops if o.startswith(("all_reduce[", "send_recv[")))
        order += sorted(o for o in ops if o.startswith("layer["))
        for op in order:
            s = ops[op]
            print(
                f"  {op:<52} {s['all']['n']:>6} {_fmt(s['all'])} | {s['big']['n']:>6} "
                f"{_fmt(s['big'])}"
            )
        for key in ("layer", "layer+ar"):
            if key in ops and "ge64" in ops[key]:
                s = ops[key]["ge64"]
                print(
                    f"  {key} for num_tokens >= 64: MAPE {s['mape']:.1f}%, "
                    f"median APE {s['median_ape']:.1f}% over {s['n']} rows"
                )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--vidur-dir", type=Path, default=ROOT.parent / "shared" / "data" / "vidur")
    ap.add_argument(
        "--fit", action="store_true", help="fit and write estimators/data/roofline.yaml"
    )
    ap.add_argument("--json", action="store_true", help="print the report as JSON")
    args = ap.parse_args(argv)
    if not (args.vidur_dir / "profiling").is_dir():
        print(
            f"error: no Vidur tables under {args.vidur_dir} (expected profiling/compute/...)",
            file=sys.stderr,
        )
        return 2
    catalog = load_catalog()
    skus = {sid: catalog.get(sid) for sid in cal.VIDUR_GPU_TO_SKU.values()}
    if args.fit:
        fit(args.vidur_dir, skus, "python benchmarks/validate_roofline.py --fit")
    report = validate(args.vidur_dir, skus)
    if args.json:
        print(json.dumps(report, indent=1))
    else:
        print_report(report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
