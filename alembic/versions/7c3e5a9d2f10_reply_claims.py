"""reply claims: one reply per learner message across workers

Revision ID: 7c3e5a9d2f10
Revises: 5b1d2c7e9a41
Create Date: 2026-11-23 23:00:00.000000

"""
from typing import Sequence, Union

from alembic import op
import sqlalchemy as sa
import sqlmodel

# revision identifiers, used by Alembic.
revision: str = '7c3e5a9d2f10'
down_revision: Union[str, Sequence[str], None] = '5b1d2c7e9a41'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    """Upgrade schema."""
    op.create_table(
        'replyclaim',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('conversation_id', sa.Integer(), nullable=False),
        sa.Column('learner_seq', sa.Integer(), nullable=False),
        sa.Column('holder', sqlmodel.sql.sqltypes.AutoString(length=96), nullable=False),
        sa.Column('lease_until', sa.DateTime(), nullable=False),
        sa.Column('created_at', sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(['conversation_id'], ['conversation.id']),
        sa.PrimaryKeyConstraint('id'),
        sa.UniqueConstraint('conversation_id', 'learner_seq'),
    )
    with op.batch_alter_table('replyclaim', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_replyclaim_conversation_id'), ['conversation_id'], unique=False)


def downgrade() -> None:
    """Downgrade schema."""
    with op.batch_alter_table('replyclaim', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_replyclaim_conversation_id'))
    op.drop_table('replyclaim')
