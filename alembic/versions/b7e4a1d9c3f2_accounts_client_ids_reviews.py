"""accounts, sign-in sessions, turn reviews, and browser-made ids for learner messages

Revision ID: b7e4a1d9c3f2
Revises: 9d4f1b2c6e83
Create Date: 2026-11-24 02:00:00.000000

Existing learners keep everything: their rows are untouched, and an account made later
links to a learner (anonymous learners can claim theirs when they sign up in that browser).
"""
from typing import Sequence, Union

from alembic import op
import sqlalchemy as sa
import sqlmodel

# revision identifiers, used by Alembic.
revision: str = 'b7e4a1d9c3f2'
down_revision: Union[str, Sequence[str], None] = '9d4f1b2c6e83'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    """Upgrade schema."""
    op.create_table(
        'account',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('username', sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column('password_hash', sqlmodel.sql.sqltypes.AutoString(), nullable=True),
        sa.Column('role', sqlmodel.sql.sqltypes.AutoString(length=16), nullable=False),
        sa.Column('learner_id', sa.Integer(), nullable=False),
        sa.Column('disabled', sa.Boolean(), nullable=False),
        sa.Column('created_at', sa.DateTime(), nullable=False),
        sa.Column('last_sign_in_at', sa.DateTime(), nullable=True),
        sa.ForeignKeyConstraint(['learner_id'], ['learner.id']),
        sa.PrimaryKeyConstraint('id'),
        sa.UniqueConstraint('learner_id'),
    )
    with op.batch_alter_table('account', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_account_username'), ['username'], unique=True)
    op.create_table(
        'authsession',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('token_hash', sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column('account_id', sa.Integer(), nullable=False),
        sa.Column('created_at', sa.DateTime(), nullable=False),
        sa.Column('expires_at', sa.DateTime(), nullable=False),
        sa.Column('last_seen_at', sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(['account_id'], ['account.id']),
        sa.PrimaryKeyConstraint('id'),
    )
    with op.batch_alter_table('authsession', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_authsession_account_id'), ['account_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_authsession_token_hash'), ['token_hash'], unique=True)
    op.create_table(
        'turnreview',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('message_id', sa.Integer(), nullable=False),
        sa.Column('reviewed_at', sa.DateTime(), nullable=False),
        sa.Column('reviewed_by', sqlmodel.sql.sqltypes.AutoString(length=128), nullable=False),
        sa.Column('note', sqlmodel.sql.sqltypes.AutoString(), nullable=True),
        sa.ForeignKeyConstraint(['message_id'], ['message.id']),
        sa.PrimaryKeyConstraint('id'),
        sa.UniqueConstraint('message_id'),
    )
    with op.batch_alter_table('message', schema=None) as batch_op:
        batch_op.add_column(sa.Column('client_id', sqlmodel.sql.sqltypes.AutoString(length=64), nullable=True))
        batch_op.create_index('ix_message_conversation_client', ['conversation_id', 'client_id'], unique=True)


def downgrade() -> None:
    """Downgrade schema."""
    with op.batch_alter_table('message', schema=None) as batch_op:
        batch_op.drop_index('ix_message_conversation_client')
        batch_op.drop_column('client_id')
    op.drop_table('turnreview')
    with op.batch_alter_table('authsession', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_authsession_token_hash'))
        batch_op.drop_index(batch_op.f('ix_authsession_account_id'))
    op.drop_table('authsession')
    with op.batch_alter_table('account', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_account_username'))
    op.drop_table('account')
