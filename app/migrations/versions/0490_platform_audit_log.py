"""The audit log: one append-only row per side-effecting action of a person or a key, and the
switch SQLite's append-only triggers read.

Revision ID: 0490_platform_audit_log
Revises: 0480_job_attempts
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from app.db.types import BigId, Json, UTCDateTime

revision = "0490_platform_audit_log"
down_revision = "0480_job_attempts"
branch_labels = None
depends_on = None

# The switch read by the triggers; app.platform.audit.append_only sets it.
SETTING = "sweepline.audit_retention"

POSTGRES_DDL = (
    f"""
    CREATE OR REPLACE FUNCTION audit_log_append_only() RETURNS trigger
    LANGUAGE plpgsql AS $$
    BEGIN
        IF coalesce(current_setting('{SETTING}', true), '') = 'on' THEN
            IF TG_OP = 'DELETE' THEN
                RETURN OLD;
            END IF;
            RETURN NEW;
        END IF;
        RAISE EXCEPTION 'audit_log is append-only: % refused', TG_OP
            USING ERRCODE = 'restrict_violation';
    END;
    $$
    """,
    """
    CREATE TRIGGER audit_log_append_only BEFORE UPDATE OR DELETE ON audit_log
    FOR EACH ROW EXECUTE FUNCTION audit_log_append_only()
    """,
    """
    CREATE TRIGGER audit_log_no_truncate BEFORE TRUNCATE ON audit_log
    FOR EACH STATEMENT EXECUTE FUNCTION audit_log_append_only()
    """,
)
POSTGRES_DROP = (
    "DROP TRIGGER IF EXISTS audit_log_no_truncate ON audit_log",
    "DROP TRIGGER IF EXISTS audit_log_append_only ON audit_log",
    "DROP FUNCTION IF EXISTS audit_log_append_only()",
)

SQLITE_DDL = (
    """
    CREATE TRIGGER audit_log_no_update BEFORE UPDATE ON audit_log
    WHEN NOT EXISTS (SELECT 1 FROM audit_log_unlock)
    BEGIN
        SELECT RAISE(ABORT, 'audit_log is append-only: UPDATE refused');
    END
    """,
    """
    CREATE TRIGGER audit_log_no_delete BEFORE DELETE ON audit_log
    WHEN NOT EXISTS (SELECT 1 FROM audit_log_unlock)
    BEGIN
        SELECT RAISE(ABORT, 'audit_log is append-only: DELETE refused');
    END
    """,
)
SQLITE_DROP = (
    "DROP TRIGGER IF EXISTS audit_log_no_update",
    "DROP TRIGGER IF EXISTS audit_log_no_delete",
)


def upgrade() -> None:
    op.create_table(
        "audit_log",
        sa.Column("id", BigId, primary_key=True, autoincrement=True),
        sa.Column("organisation_id", BigId, nullable=False),
        sa.Column("workspace_id", BigId, nullable=True),
        sa.Column("at", UTCDateTime, nullable=False),
        sa.Column("actor_kind", sa.String(16), nullable=False),
        sa.Column("user_id", BigId, nullable=True),
        sa.Column("api_key_id", BigId, nullable=True),
        sa.Column("client_address", sa.String(64), nullable=False),
        sa.Column("user_agent", sa.String(400), nullable=False),
        sa.Column("action", sa.String(64), nullable=False),
        sa.Column("object_type", sa.String(64), nullable=False),
        sa.Column("object_id", sa.String(255), nullable=False),
        sa.Column("before", Json, nullable=True),
        sa.Column("after", Json, nullable=True),
        sa.CheckConstraint(
            "actor_kind IN ('user', 'api_key', 'system', 'anonymous')", name="actor_kind"
        ),
    )
    op.create_index("ix_audit_log_org_id", "audit_log", ["organisation_id", "id"])
    op.create_index("ix_audit_log_at", "audit_log", ["at"])
    op.create_table("audit_log_unlock", sa.Column("id", sa.Integer, primary_key=True))
    ddl = POSTGRES_DDL if op.get_bind().dialect.name == "postgresql" else SQLITE_DDL
    for statement in ddl:
        op.execute(statement)


def downgrade() -> None:
    drop = POSTGRES_DROP if op.get_bind().dialect.name == "postgresql" else SQLITE_DROP
    for statement in drop:
        op.execute(statement)
    op.drop_table("audit_log_unlock")
    op.drop_index("ix_audit_log_at", table_name="audit_log")
    op.drop_index("ix_audit_log_org_id", table_name="audit_log")
    op.drop_table("audit_log")
