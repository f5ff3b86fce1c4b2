"""risk severity and alerts: each flag's severity (imminent | serious) and when its alert went out

Revision ID: c4a8e2f61d07
Revises: b7e4a1d9c3f2
Create Date: 2026-11-25 19:00:00.000000

"""
from typing import Sequence, Union

from alembic import op
import sqlalchemy as sa
import sqlmodel

# revision identifiers, used by Alembic.
revision: str = 'c4a8e2f61d07'
down_revision: Union[str, Sequence[str], None] = 'b7e4a1d9c3f2'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    """Upgrade schema."""
    with op.batch_alter_table('riskevent') as batch:
        batch.add_column(sa.Column('severity', sqlmodel.sql.sqltypes.AutoString(length=16), nullable=False,
                                   server_default=''))
        batch.add_column(sa.Column('alerted_at', sa.DateTime(), nullable=True))


def downgrade() -> None:
    """Downgrade schema."""
    with op.batch_alter_table('riskevent') as batch:
        batch.drop_column('alerted_at')
        batch.drop_column('severity')
