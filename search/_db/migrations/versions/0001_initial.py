"""Initial results schema: jobs, configurations, capacity results, Pareto points.

Revision ID: 0001
Revises:
Create Date: 2025-01-01 00:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# written out here, not imported from models.py: a migration stays as it was written
_TIMESTAMP = sa.DateTime(timezone=True)
_JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def upgrade() -> None:
    op.create_table(
        "jobs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("spec", sa.Text(), nullable=False),
        sa.Column("spec_fingerprint", sa.String(length=64), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("created_at", _TIMESTAMP, nullable=False),
        sa.Column("started_at", _TIMESTAMP, nullable=True),
        sa.Column("finished_at", _TIMESTAMP, nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("ray_job_id", sa.String(length=128), nullable=True),
        sa.Column("llmcap_version", sa.String(length=64), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_jobs"),
        sa.CheckConstraint(
            "status IN ('pending', 'running', 'succeeded', 'failed', 'cancelled')",
            name="ck_jobs_status",
        ),
    )
    op.create_index("ix_jobs_spec_fingerprint", "jobs", ["spec_fingerprint"])

    op.create_table(
        "configurations",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("job_id", sa.Integer(), nullable=False),
        sa.Column("spec_fingerprint", sa.String(length=64), nullable=False),
        sa.Column("fingerprint", sa.String(length=64), nullable=False),
        sa.Column("sku", sa.String(length=64), nullable=False),
        sa.Column("tp", sa.Integer(), nullable=False),
        sa.Column("pp", sa.Integer(), nullable=False),
        sa.Column("replicas", sa.Integer(), nullable=False),
        sa.Column("scheduler", sa.String(length=32), nullable=False),
        sa.Column("batch_size", sa.Integer(), nullable=False),
        sa.Column("chunk_size", sa.Integer(), nullable=True),
        sa.Column("max_tokens", sa.Integer(), nullable=True),
        sa.Column("precision", sa.String(length=16), nullable=False),
        sa.Column("num_gpus", sa.Integer(), nullable=False),
        sa.Column("cost_per_hour", sa.Float(), nullable=False),
        sa.Column("params", _JSON, nullable=False),
        sa.Column("feasible", sa.Boolean(), nullable=False),
        sa.Column("infeasible_reason", sa.Text(), nullable=True),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_configurations"),
        sa.ForeignKeyConstraint(["job_id"], ["jobs.id"], name="fk_configurations_job_id_jobs"),
        sa.UniqueConstraint(
            "spec_fingerprint",
            "fingerprint",
            name="uq_configurations_spec_fingerprint_fingerprint",
        ),
        sa.CheckConstraint(
            "status IN ('pending', 'done', 'failed', 'infeasible')",
            name="ck_configurations_status",
        ),
    )
    op.create_index("ix_configurations_job_id", "configurations", ["job_id"])
    op.create_index(
        "ix_configurations_spec_fingerprint_status",
        "configurations",
        ["spec_fingerprint", "status"],
    )

    op.create_table(
        "capacity_results",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("configuration_id", sa.Integer(), nullable=False),
        sa.Column("capacity_qps", sa.Float(), nullable=False),
        sa.Column("qps_per_dollar", sa.Float(), nullable=False),
        sa.Column("cost_per_million_output_tokens", sa.Float(), nullable=True),
        sa.Column("ttft_p50", sa.Float(), nullable=True),
        sa.Column("ttft_p90", sa.Float(), nullable=True),
        sa.Column("ttft_p95", sa.Float(), nullable=True),
        sa.Column("ttft_p99", sa.Float(), nullable=True),
        sa.Column("tbt_p50", sa.Float(), nullable=True),
        sa.Column("tbt_p90", sa.Float(), nullable=True),
        sa.Column("tbt_p95", sa.Float(), nullable=True),
        sa.Column("tbt_p99", sa.Float(), nullable=True),
        sa.Column("tpot_p50", sa.Float(), nullable=True),
        sa.Column("tpot_p90", sa.Float(), nullable=True),
        sa.Column("tpot_p99", sa.Float(), nullable=True),
        sa.Column("e2e_p50", sa.Float(), nullable=True),
        sa.Column("e2e_p90", sa.Float(), nullable=True),
        sa.Column("e2e_p99", sa.Float(), nullable=True),
        sa.Column("scheduling_delay_p99", sa.Float(), nullable=True),
        sa.Column("throughput_tokens_per_s", sa.Float(), nullable=True),
        sa.Column("throughput_requests_per_s", sa.Float(), nullable=True),
        sa.Column("mfu", sa.Float(), nullable=True),
        sa.Column("mbu", sa.Float(), nullable=True),
        sa.Column("kv_capacity_tokens", sa.Integer(), nullable=True),
        sa.Column("weights_gb_per_gpu", sa.Float(), nullable=True),
        sa.Column("slo_passed", sa.Boolean(), nullable=False),
        sa.Column("slo_detail", _JSON, nullable=False),
        sa.Column("num_simulations", sa.Integer(), nullable=False),
        sa.Column("wall_time_s", sa.Float(), nullable=False),
        sa.Column("created_at", _TIMESTAMP, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_capacity_results"),
        sa.ForeignKeyConstraint(
            ["configuration_id"],
            ["configurations.id"],
            name="fk_capacity_results_configuration_id_configurations",
            ondelete="CASCADE",
        ),
        sa.UniqueConstraint("configuration_id", name="uq_capacity_results_configuration_id"),
    )

    op.create_table(
        "pareto_points",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("job_id", sa.Integer(), nullable=False),
        sa.Column("frontier", sa.String(length=100), nullable=False),
        sa.Column("configuration_id", sa.Integer(), nullable=False),
        sa.Column("rank", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_pareto_points"),
        sa.ForeignKeyConstraint(
            ["job_id"], ["jobs.id"], name="fk_pareto_points_job_id_jobs", ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["configuration_id"],
            ["configurations.id"],
            name="fk_pareto_points_configuration_id_configurations",
            ondelete="CASCADE",
        ),
        sa.UniqueConstraint(
            "job_id", "frontier", "rank", name="uq_pareto_points_job_id_frontier_rank"
        ),
    )
    op.create_index("ix_pareto_points_configuration_id", "pareto_points", ["configuration_id"])


def downgrade() -> None:
    op.drop_table("pareto_points")
    op.drop_table("capacity_results")
    op.drop_table("configurations")
    op.drop_table("jobs")
