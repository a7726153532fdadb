"""The kinds of the event heap's entries, which order the events of one instant.

An entry is ``(time, kind, sequence number, replica, a, b)``; at equal times the lower
kind goes first: batch ends free resources before new work arrives.
"""

from __future__ import annotations

BATCH_END = 0
WAKE = 1  # a free stage 0 (pipeline parallelism)
ARRIVAL = 2  # the client sends a request
TOKENIZED = 3  # a replica's frontend has tokenized a request's prompt: its scheduler takes it
DISPATCH = 4  # a wake-up after the arrivals of the same instant
TRANSFER = 5  # a prompt's KV cache reaches the decode pool
