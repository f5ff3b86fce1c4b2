"""Tutor: a chat tutor whose every turn is one structured JSON reply."""
