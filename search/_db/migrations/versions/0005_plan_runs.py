"""Runs of capacity plans.

- ``plan_runs``: one row per `llmcap plan run`: the plan's name and fingerprint, each
  service's search inputs and the prices used, the report's figures, what changed since the
  previous run of the plan, the exit status and where the report was written.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-26 00:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_JSON = sa.JSON().with_variant(JSONB(), "postgresql")


def upgrade() -> None:
    op.create_table(
        "plan_runs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("plan_name", sa.String(length=100), nullable=False),
        sa.Column("plan_fingerprint", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("exit_status", sa.Integer(), nullable=False),
        sa.Column("inputs", _JSON, nullable=False),
        sa.Column("summary", _JSON, nullable=False),
        sa.Column("changes", _JSON, nullable=False),
        sa.Column("report_dir", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_plan_runs"),
    )
    op.create_index("ix_plan_runs_plan_name", "plan_runs", ["plan_name"])


def downgrade() -> None:
    op.drop_index("ix_plan_runs_plan_name", table_name="plan_runs")
    op.drop_table("plan_runs")
