"""How long a prompt's KV cache takes to reach the decode pool after its prefill ends."""

from __future__ import annotations


def layerwise_transfer_wait(transfer_s: float, prefill_s: float, layers: int) -> float:
    """The wait after the prefill's end when each layer's KV is sent as the layer finishes.

    The prefill produces the L layers' KV one after another over `prefill_s` (p = prefill_s /
    L each) and the link sends them in order (x = transfer_s / L each); layer i is sent once
    it is computed and the layer before it is sent, so the last one arrives at
    max over i of (i p + (L - i + 1) x) = max(L p + x, p + L x) after the prefill began: the
    wait after its end is the larger of one layer's transfer (the link keeps up) and the
    transfer less all but one layer of the prefill (the link is the bottleneck).
    `layers` <= 0 means no overlap: the whole transfer follows the prefill.
    """
    if layers <= 0 or transfer_s <= 0.0:
        return max(transfer_s, 0.0)
    prefill_s = max(prefill_s, 0.0)
    return max(transfer_s / layers, transfer_s - prefill_s * (layers - 1) / layers)
