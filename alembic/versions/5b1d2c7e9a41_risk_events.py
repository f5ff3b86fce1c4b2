"""risk events: learner messages the safety screen flagged, for review

Revision ID: 5b1d2c7e9a41
Revises: 1600ef5b787c
Create Date: 2026-11-23 22:50:00.000000

"""
from typing import Sequence, Union

from alembic import op
import sqlalchemy as sa
import sqlmodel

# revision identifiers, used by Alembic.
revision: str = '5b1d2c7e9a41'
down_revision: Union[str, Sequence[str], None] = '1600ef5b787c'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    """Upgrade schema."""
    op.create_table(
        'riskevent',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('conversation_id', sa.Integer(), nullable=False),
        sa.Column('message_id', sa.Integer(), nullable=False),
        sa.Column('reply_id', sa.Integer(), nullable=True),
        sa.Column('module_id', sqlmodel.sql.sqltypes.AutoString(length=128), nullable=False),
        sa.Column('label', sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column('confidence', sa.Float(), nullable=False),
        sa.Column('source', sqlmodel.sql.sqltypes.AutoString(length=16), nullable=False),
        sa.Column('evidence_json', sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column('created_at', sa.DateTime(), nullable=False),
        sa.Column('reviewed_at', sa.DateTime(), nullable=True),
        sa.Column('reviewed_by', sqlmodel.sql.sqltypes.AutoString(length=128), nullable=True),
        sa.Column('review_note', sqlmodel.sql.sqltypes.AutoString(), nullable=True),
        sa.ForeignKeyConstraint(['conversation_id'], ['conversation.id']),
        sa.ForeignKeyConstraint(['message_id'], ['message.id']),
        sa.ForeignKeyConstraint(['reply_id'], ['message.id']),
        sa.PrimaryKeyConstraint('id'),
    )
    with op.batch_alter_table('riskevent', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_riskevent_conversation_id'), ['conversation_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_riskevent_message_id'), ['message_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_riskevent_module_id'), ['module_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_riskevent_label'), ['label'], unique=False)
        batch_op.create_index(batch_op.f('ix_riskevent_created_at'), ['created_at'], unique=False)


def downgrade() -> None:
    """Downgrade schema."""
    with op.batch_alter_table('riskevent', schema=None) as batch_op:
        for column in ('created_at', 'label', 'module_id', 'message_id', 'conversation_id'):
            batch_op.drop_index(batch_op.f(f'ix_riskevent_{column}'))
    op.drop_table('riskevent')
