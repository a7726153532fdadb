"""Job-scoped answers, shared work and honest capacities.

- ``job_configurations``: the configurations of each job (its space within its budget); every
  answer for a job covers these only.  Existing jobs get the configurations they registered
  (the best that can be recovered; a job that only reused earlier results has none until it is
  run again).
- ``jobs.driver`` and ``jobs.heartbeat_at``: the running driver and its last heartbeat, so a
  job whose driver died shows as interrupted instead of running.
- ``configurations.claimed_by`` and ``claim_expires_at``: a driver's lease on a configuration
  it evaluates, so two drivers of one spec share the work and a dead driver's claims expire.
- ``configurations.refine_to``: a refinement decided and not yet stored, so a job resumed after
  a kill during refinement finishes the refinements an uninterrupted run makes.
- ``capacity_results.capacity_kind`` (measured | ceiling), ``num_requests`` and
  ``rejected_requests``: whether a capacity rests on a measurement, how long the workload was,
  and how many of its requests the deployment refused.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-24 00:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_TIMESTAMP = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "job_configurations",
        sa.Column("job_id", sa.Integer(), nullable=False),
        sa.Column("configuration_id", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["job_id"], ["jobs.id"], name="fk_job_configurations_job_id_jobs", ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["configuration_id"],
            ["configurations.id"],
            name="fk_job_configurations_configuration_id_configurations",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("job_id", "configuration_id", name="pk_job_configurations"),
    )
    op.create_index(
        "ix_job_configurations_configuration_id", "job_configurations", ["configuration_id"]
    )
    op.execute(
        "INSERT INTO job_configurations (job_id, configuration_id) "
        "SELECT job_id, id FROM configurations"
    )
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("driver", sa.String(length=128), nullable=True))
        batch.add_column(sa.Column("heartbeat_at", _TIMESTAMP, nullable=True))
    with op.batch_alter_table("configurations") as batch:
        batch.add_column(sa.Column("claimed_by", sa.String(length=128), nullable=True))
        batch.add_column(sa.Column("claim_expires_at", _TIMESTAMP, nullable=True))
        batch.add_column(sa.Column("refine_to", sa.Float(), nullable=True))
    with op.batch_alter_table("capacity_results") as batch:
        batch.add_column(sa.Column("capacity_kind", sa.String(length=16), nullable=True))
        batch.add_column(sa.Column("num_requests", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("rejected_requests", sa.Integer(), nullable=True))
        batch.create_check_constraint("capacity_kind", "capacity_kind IN ('measured', 'ceiling')")


def downgrade() -> None:
    with op.batch_alter_table("capacity_results") as batch:
        batch.drop_constraint("ck_capacity_results_capacity_kind", type_="check")
        batch.drop_column("rejected_requests")
        batch.drop_column("num_requests")
        batch.drop_column("capacity_kind")
    with op.batch_alter_table("configurations") as batch:
        batch.drop_column("refine_to")
        batch.drop_column("claim_expires_at")
        batch.drop_column("claimed_by")
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("heartbeat_at")
        batch.drop_column("driver")
    op.drop_index("ix_job_configurations_configuration_id", table_name="job_configurations")
    op.drop_table("job_configurations")
