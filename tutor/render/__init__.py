"""Plain data for the page: what a message shows (display), views of a conversation, the
one markdown renderer, and cutting an unreadable reply to something showable (fallback).

May import contract and storage; never turns, teach or web.
"""
