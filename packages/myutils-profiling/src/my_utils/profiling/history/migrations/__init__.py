"""Alembic migrations of the run store (``env.py`` and ``versions/``); applied by ``history.migrate``."""
