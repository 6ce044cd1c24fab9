"""A real PostgreSQL server for the store tests: the ``pgserver`` wheel (PostgreSQL 16
binaries) started in a temporary folder, once per test session (``tests/conftest.py``).

As root, pgserver runs the server as a system user ``pgserver`` it creates (PostgreSQL refuses
to run as root) and listens on a Unix socket only, inside the data folder.  When it cannot
start (no wheel for the platform, no way to add the user), the tests that need it are skipped
with the reason; nothing else in the suite depends on it.
"""
from __future__ import annotations

import itertools
import tempfile
import urllib.parse
import warnings

_COUNTER = itertools.count()


class PgServer:
    """A started server: ``url`` (libpq URL of its ``postgres`` database) and ``stop()``."""

    def __init__(self) -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")     # platformdirs: XDG_RUNTIME_DIR not set
            import pgserver
        self._dir = tempfile.TemporaryDirectory(prefix="dpledger-pg-")
        self._server = pgserver.get_server(self._dir.name + "/data", cleanup_mode="delete")
        self.url = self._server.get_uri()

    def store_url(self, prefix: str = "t") -> str:
        """A URL naming a fresh schema (one store) in the server's database."""
        return with_schema(self.url, f"{prefix}{next(_COUNTER)}_{id(self) % 9973}")

    def stop(self) -> None:
        try:
            self._server.cleanup()
        finally:
            self._dir.cleanup()


def with_schema(url: str, schema: str) -> str:
    parts = urllib.parse.urlsplit(url)
    query = (parts.query + "&" if parts.query else "") + f"schema={schema}"
    return urllib.parse.urlunsplit((parts.scheme, parts.netloc, parts.path, query, ""))


def connect(url: str):
    """A plain psycopg connection to the schema of a store URL (to edit rows as a user of
    psql would, around dpledger)."""
    import psycopg
    from dpledger.accounting.store_backends import split_schema
    conninfo, schema = split_schema(url)
    return psycopg.connect(conninfo, autocommit=True, options=f"-c search_path={schema}")
