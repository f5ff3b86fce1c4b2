"""What a new password must be (OWASP ASVS 2.1): at least PASSWORD_MIN characters once runs
of spaces count as one, at most PASSWORD_MAX, not only spaces, and not one of the
commonly used passwords in `common-passwords.txt.gz` beside this file. No rules about
kinds of characters (ASVS 2.1.9): any text of the right length that is not common will do.

The list is the 19,640 most common passwords that Django ships as its default
(django/contrib/auth/common-passwords.txt.gz in Django 5.2.19, BSD-3-Clause; from Royce
Williams' list built from breached-password corpora), copied unchanged. A kept list on
disk rather than a library or an online service: Django's validator is the same list
behind a whole web framework, zxcvbn scores strength rather than refusing known
passwords, and a breached-password service would send a hash prefix of every new
password off the machine (and needs the network, which a school's server may not have).
Compared as Django compares it: lower-cased, without surrounding spaces.
"""

from __future__ import annotations

import gzip
import re
from functools import cache
from pathlib import Path

__all__ = ["COMMON_PASSWORDS_FILE", "PASSWORD_MAX", "PASSWORD_MIN", "common_passwords", "password_problem"]

PASSWORD_MIN, PASSWORD_MAX = 10, 256
COMMON_PASSWORDS_FILE = Path(__file__).resolve().parent / "common-passwords.txt.gz"
_SPACES = re.compile(r"\s+")


@cache
def common_passwords() -> frozenset[str]:
    with gzip.open(COMMON_PASSWORDS_FILE, "rt", encoding="utf-8") as lines:
        return frozenset(line.strip() for line in lines if line.strip())


def password_problem(password: str | None) -> str | None:
    """None for a password that will do, else the error code (tutor.access.accounts.MESSAGES)."""
    password = password or ""
    if len(password) > PASSWORD_MAX:
        return "password_long"
    if password and not password.strip():
        return "password_blank"
    if len(_SPACES.sub(" ", password)) < PASSWORD_MIN:  # ASVS 2.1.1: runs of spaces count once
        return "password_short"
    if password.strip().lower() in common_passwords():
        return "password_common"
    return None
