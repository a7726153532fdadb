"""Size limits on user input, each with the reason it exists.

A number in a spec or on the command line can ask for more than any machine has: a billion
requests, a million replicas, a space of a million configurations.  These limits refuse such
input before anything is allocated, with a message that says why; the numbers come from
measurements of `llmcap simulate` (peak memory against requests and replicas).
"""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, PositiveInt

MAX_NUM_REQUESTS = 1_000_000
# peak memory per simulated request at chat lengths (its per-token records), measured
BYTES_PER_REQUEST = 12_000

MAX_REPLICAS = 1024
# memory per simulated replica (its scheduler, KV-cache blocks and pipeline lanes), measured
BYTES_PER_REPLICA = 5_000

DEFAULT_MAX_CONFIGURATIONS = 100_000  # a spec's max_configurations / --max-configurations


def human_bytes(count: float) -> str:
    """``count`` bytes as a short text: 12 KB, 3.4 GB, 12 PB."""
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if count < 1000:
            return f"{count:.3g} {unit}"
        count /= 1000
    return f"{count:,.3g} PB"


def check_num_requests(value: int) -> int:
    if value > MAX_NUM_REQUESTS:
        raise ValueError(
            f"at most {MAX_NUM_REQUESTS:,} requests: each simulated request keeps its "
            f"per-token records, about {human_bytes(BYTES_PER_REQUEST)} of memory, so "
            f"{value:,} would need about {human_bytes(value * BYTES_PER_REQUEST)}"
        )
    return value


def check_replicas(value: int) -> int:
    if value > MAX_REPLICAS:
        raise ValueError(
            f"at most {MAX_REPLICAS:,} replicas: each replica is simulated with its own "
            f"scheduler and KV cache (about {human_bytes(BYTES_PER_REPLICA)} each before any "
            f"request, {human_bytes(value * BYTES_PER_REPLICA)} for {value:,}); replicas of one "
            "configuration serve independent shares of the traffic, so simulate fewer and scale"
        )
    return value


NumRequests = Annotated[PositiveInt, AfterValidator(check_num_requests)]
Replicas = Annotated[PositiveInt, AfterValidator(check_replicas)]
