"""Alembic environment: our tables' metadata, and the database from TUTOR_DATABASE_URL.

`reflex db migrate` / `reflex db makemigrations` drive alembic through Reflex; the app and
the CLI call `Store.migrate()`, which runs this file with the Store's own connection.
"""

from logging.config import fileConfig

from sqlmodel import SQLModel, create_engine

import tutor.storage.store  # noqa: F401  (registers the tables on SQLModel.metadata)
from alembic import context
from tutor.settings import database_url

config = context.config
if config.config_file_name is not None and config.attributes.get("configure_logger", True):
    fileConfig(config.config_file_name, disable_existing_loggers=False)

target_metadata = SQLModel.metadata


def run_migrations_offline() -> None:
    context.configure(
        url=database_url(),
        target_metadata=target_metadata,
        literal_binds=True,
        render_as_batch=True,
        dialect_opts={"paramstyle": "named"},
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    engine = create_engine(database_url())
    with engine.begin() as connection:
        _run(connection)


def _run(connection) -> None:
    context.configure(connection=connection, target_metadata=target_metadata, render_as_batch=True)
    with context.begin_transaction():
        context.run_migrations()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
