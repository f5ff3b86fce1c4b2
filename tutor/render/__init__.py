"""Plain data for the page: what a message shows (display), views of a conversation, the
one markdown renderer, cutting an unreadable reply to something showable (fallback), and a
reply as plain text for the terminal and the operator's transcript (plain).

May import contract and storage; never turns, teach or web.
"""
