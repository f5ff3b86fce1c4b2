"""The web layer: Reflex states (chat, home, sign-in, the operator console) and the HTTP
routes (sign-in forms, CSV export), the socket's origin guard and the per-event identity
gate. With tutor/tutor.py, the only code that imports reflex; every handler checks who is
asking before it reads or writes anyone's data.

May import every other layer; nothing below imports it.
"""
