"""Hide the password in a database URL before it is printed or logged."""

from __future__ import annotations

import re

__all__ = ["redact_url"]

#: ``scheme://user:password@host`` — the password is everything between the first ``:`` after
#: ``//`` and the last ``@`` before the host (a password may itself contain ``@`` or ``:``).
_CREDENTIALS = re.compile(
    r"^(?P<head>[A-Za-z][A-Za-z0-9+.\-]*://[^:/@]*):(?P<password>.*)@(?P<tail>[^@]*)$"
)


def redact_url(url: str) -> str:
    """``url`` with its password replaced by ``***``; any other text comes back unchanged.

    >>> redact_url("postgresql://tuner:s3cret@db:5432/proxy")
    'postgresql://tuner:***@db:5432/proxy'
    >>> redact_url("sqlite:///proxy.db")
    'sqlite:///proxy.db'
    """
    match = _CREDENTIALS.match(url)
    if match is None or not match.group("password"):
        return url
    return f"{match.group('head')}:***@{match.group('tail')}"
