"""check attempts: judged answers to checks of understanding (mastery is read from them)

Revision ID: 9d4f1b2c6e83
Revises: 7c3e5a9d2f10
Create Date: 2026-11-24 10:00:00.000000

"""
from typing import Sequence, Union

from alembic import op
import sqlalchemy as sa
import sqlmodel

# revision identifiers, used by Alembic.
revision: str = '9d4f1b2c6e83'
down_revision: Union[str, Sequence[str], None] = '7c3e5a9d2f10'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    """Upgrade schema."""
    op.create_table(
        'checkattempt',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('conversation_id', sa.Integer(), nullable=False),
        sa.Column('message_id', sa.Integer(), nullable=False),
        sa.Column('reply_id', sa.Integer(), nullable=True),
        sa.Column('module_id', sqlmodel.sql.sqltypes.AutoString(length=128), nullable=False),
        sa.Column('topic_id', sqlmodel.sql.sqltypes.AutoString(length=128), nullable=False),
        sa.Column('check_id', sqlmodel.sql.sqltypes.AutoString(length=128), nullable=False),
        sa.Column('score', sa.Integer(), nullable=True),
        sa.Column('criteria_json', sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column('feedback', sqlmodel.sql.sqltypes.AutoString(), nullable=False),
        sa.Column('source', sqlmodel.sql.sqltypes.AutoString(length=16), nullable=False),
        sa.Column('created_at', sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(['conversation_id'], ['conversation.id']),
        sa.ForeignKeyConstraint(['message_id'], ['message.id']),
        sa.ForeignKeyConstraint(['reply_id'], ['message.id']),
        sa.PrimaryKeyConstraint('id'),
    )
    with op.batch_alter_table('checkattempt', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_checkattempt_conversation_id'), ['conversation_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_checkattempt_message_id'), ['message_id'], unique=False)


def downgrade() -> None:
    """Downgrade schema."""
    with op.batch_alter_table('checkattempt', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_checkattempt_message_id'))
        batch_op.drop_index(batch_op.f('ix_checkattempt_conversation_id'))
    op.drop_table('checkattempt')
