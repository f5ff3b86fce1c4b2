"""The database: tables and queries (store), a turn's statements on the driver's cursor and
the messages they read as plain rows (message_rows), the database's threads, and what to do
when the database is unavailable (dbfaults).

Imports nothing of ours but tutor.settings and tutor.text.
"""
