"""The database: tables and queries (store), a turn's statements on the driver's cursor,
the database's threads, and what to do when the database is unavailable (dbfaults).

Imports nothing of ours but tutor.settings and tutor.text.
"""
