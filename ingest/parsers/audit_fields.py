"""Field readers shared by the audit log formats (XML, CSV, JSON): accounts, times, outcomes.

Pure: no Django. The formats differ in layout but name the same things the same way,
because MySQL Enterprise Audit and Percona's audit_log plugin share their field set.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from functools import lru_cache
from typing import NamedTuple

# `priv_user[user] @ host [ip]`, as MariaDB and MySQL build it (make_user_name in sql/log.cc)
# for the general_log table and the audit plugins, each part empty when unknown:
#   "root[root] @ localhost []"                  socket connection
#   "alice[alice] @ localhost [127.0.0.1]"       TCP, host name resolved
#   "u[u] @  [127.0.0.1]"                        TCP, skip-name-resolve
#   "[alice] @ localhost [127.0.0.1]"            before authentication (no account yet)
#   "joe[anon] @ host [10.0.0.5]"                authenticated as another account
#   "[SQL_SLAVE] @  []"                          replication threads
_USER_HOST = re.compile(
    r"""
    (?P<account>[^\[]*)          # priv_user: the account the server authenticated
    \[(?P<user>.*)\]             # the user name the client gave (may itself hold brackets)
    [ ]@[ ]
    (?P<host>[^ ]*)              # host name (or address), empty when not resolved
    [ ]\[(?P<ip>[^\]]*)\]        # client address, empty for socket connections
    [ \t\r\n]*\Z
    """,
    re.VERBOSE | re.DOTALL,
)


class UserHost(NamedTuple):
    user: str | None  # the name the client gave
    account: str | None  # the authenticated account (priv_user)
    host: str | None
    ip: str | None


NOBODY = UserHost(None, None, None, None)


def parse_user_host(text: str | bytes) -> UserHost:
    """Split `priv_user[user] @ host [ip]`; every part None when empty, all None when `text` is
    not in that form (a bare user name, say: `any(result)` tells)."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    return _split_user_host(text)


# Audit logs repeat the same few accounts and seconds record after record: each distinct text
# is read once (the caches are bounded: a hostile log of distinct values only evicts).
@lru_cache(maxsize=4096)
def _split_user_host(text: str) -> UserHost:
    m = _USER_HOST.match(text)
    if m is None:
        return NOBODY
    return UserHost(m["user"] or None, m["account"] or None, m["host"] or None, m["ip"] or None)


# "2019-10-03T14:06:33 UTC", "2019-10-03T14:06:33", "2019-10-03 14:06:33", with fractions.
_TIME = re.compile(
    r"""
    ^\s*(?P<stamp>\d{4}-\d{2}-\d{2}[T\x20]\d{2}:\d{2}:\d{2}(?:\.\d{1,6})?)  # date and time
    \s*(?P<zone>UTC|Z|[+-]\d{2}:?\d{2})?\s*$                                  # zone, if any
    """,
    re.VERBOSE,
)


@lru_cache(maxsize=256)
def parse_time(text: str) -> datetime | None:
    """An audit timestamp as a datetime: aware when the text names a zone, else naive (server
    local time: the pipeline applies the source's zone). None when it is no timestamp.
    Records of the same second get the same (immutable) object."""
    m = _TIME.match(text)
    if m is None:
        return None
    try:
        when = datetime.fromisoformat(m["stamp"].replace(" ", "T"))
    except ValueError:
        return None
    zone = m["zone"]
    if zone in ("UTC", "Z"):
        return when.replace(tzinfo=UTC)
    if zone:
        return datetime.fromisoformat(m["stamp"].replace(" ", "T") + zone[:3] + ":" + zone[-2:])
    return when


def outcome(code: str | int | None) -> str | None:
    """A status as AuditWeb stores it: None (not said), "ok" (0), or the error code as text."""
    if code is None:
        return None
    text = str(code).strip()
    if not text:
        return None
    return "ok" if text == "0" else text


def login_status(command: str, status: str | None, extra: dict[str, str]) -> str | None:
    """`status` as stored, but `denied` for a refused login (a Connect whose code is not 0), as
    the general log and server_audit say it, so that one filter finds them in every format; the
    server's code (1045: a wrong password) stays in `extra["status"]`."""
    if command != "Connect" or status in (None, "ok", "denied"):
        return status
    extra["status"] = status
    return "denied"


def to_int(text: str | int | None) -> int | None:
    if text is None:
        return None
    try:
        return int(str(text).strip())
    except ValueError:
        return None
