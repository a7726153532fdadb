"""Capacity bracket: the smallest failing rate probed and the tolerance searched at.

A result's true capacity lies in [capacity_qps, capacity_upper_qps); the driver refines
the configurations whose bracket could still change the ranking, and `tolerance` says
how finely each result was searched.  Rows written before this revision keep NULL
(unknown): the driver refines them again when they matter.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-23 00:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("capacity_results") as batch:
        batch.add_column(sa.Column("capacity_upper_qps", sa.Float(), nullable=True))
        batch.add_column(sa.Column("tolerance", sa.Float(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("capacity_results") as batch:
        batch.drop_column("tolerance")
        batch.drop_column("capacity_upper_qps")
