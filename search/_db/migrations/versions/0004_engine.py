"""The engine profile of each configuration.

- ``configurations.engine``: the serving engine's profile (``name@version``: vllm, sglang,
  trtllm, or vidur for Vidur's 2024 vLLM) the configuration was simulated with.  Rows stored
  before engine profiles stay NULL: they were all simulated as ``vidur@2024``.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-25 00:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("configurations") as batch:
        batch.add_column(sa.Column("engine", sa.String(length=64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("configurations") as batch:
        batch.drop_column("engine")
