"""Alembic's entry point for the run store's migrations (run by ``history.migrate``, never by hand-made config).

The caller hands over an open connection inside a transaction (``config.attributes["connection"]``),
so a migration and the lock that serialises concurrent openers share one transaction. Offline mode
(``alembic upgrade --sql``) prints the SQL for a database administrator who applies it by hand.
"""

from __future__ import annotations

from alembic import context

# not alembic_version: a shared database may hold an application's own
from my_utils.profiling.history.revisions import VERSION_TABLE
from my_utils.profiling.history.schema import metadata

if context.is_offline_mode():
    context.configure(url=context.config.get_main_option("sqlalchemy.url"), target_metadata=metadata,
                      literal_binds=True, version_table=VERSION_TABLE)
    with context.begin_transaction():
        context.run_migrations()
else:
    context.configure(connection=context.config.attributes["connection"], target_metadata=metadata,
                      version_table=VERSION_TABLE, transactional_ddl=True)
    with context.begin_transaction():
        context.run_migrations()
