"""The link a decode pool's KV cache arrives over: auto, nvlink (checked against the node
shape) or the network."""

from __future__ import annotations

import pytest

from simulator import DecodePoolError, DecodeSpec, KvLink
from simulator._deployment import kv_link_gbps
from sku_catalog import load_catalog

CATALOG = load_catalog()
H100, H200, PCIE = CATALOG.get("h100-sxm"), CATALOG.get("h200"), CATALOG.get("h100-pcie")


def _gbps(prefill, prefill_gpus: int, decode, tp: int, link: KvLink) -> float:
    return kv_link_gbps(prefill, prefill_gpus, DecodeSpec(decode, tp, 1, link=link))


def test_auto_takes_nvlink_inside_one_node_else_the_network() -> None:
    # h100-sxm: NVSwitch at 450 GB/s per GPU inside the 8-GPU node, 50 GB/s between nodes
    assert _gbps(H100, 4, H100, 4, KvLink.AUTO) == 450
    assert _gbps(H100, 8, H100, 4, KvLink.AUTO) == 50  # 12 GPUs: two nodes
    assert _gbps(H100, 4, H200, 4, KvLink.AUTO) == 50  # two SKUs: two nodes
    assert _gbps(H100, 4, H100, 4, KvLink.NETWORK) == 50  # asked for: even inside a node


def test_nvlink_is_refused_where_the_node_shape_lacks_it() -> None:
    assert _gbps(H100, 4, H100, 4, KvLink.NVLINK) == 450
    cases = [
        ((H100, 4, H200, 4), "h100-sxm and h200 GPUs do not share a node"),
        ((H100, 8, H100, 4), "the two pools' 12 GPUs do not fit the 8 GPUs of a h100-sxm node"),
        ((PCIE, 1, PCIE, 1), "a h100-pcie node has no NVLink (its GPUs talk over PCIe)"),
    ]
    for args, reason in cases:
        with pytest.raises(DecodePoolError, match="decode pool: link nvlink: ") as caught:
            _gbps(*args, KvLink.NVLINK)
        assert reason in str(caught.value)
