"""Private files: the data dir is 0700, the SQLite database and its WAL/SHM files 0600.

The database holds every job's headers and env (and the encrypted secrets); with the
default umask it was 0644 in a 0755 directory, so any local user could read it.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

#: The suffixes SQLite adds for its write-ahead log and shared memory.
SQLITE_SIDE_FILES = ("-wal", "-shm", "-journal")


def private_dir(path: Path) -> None:
    """Create ``path`` if needed, and make it 0700."""
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(path, 0o700)


def private_sqlite(url: str) -> None:
    """For a ``sqlite:///`` file URL: create the database file 0600 before SQLite does (its
    WAL and SHM files take the database's mode), and make existing ones 0600."""
    if not url.startswith("sqlite:///") or ":memory:" in url:
        return
    db = Path(url.removeprefix("sqlite:///").split("?", 1)[0])
    if not db.exists():
        db.parent.mkdir(parents=True, exist_ok=True)
        os.close(os.open(db, os.O_WRONLY | os.O_CREAT, 0o600))
    for path in (db, *(db.with_name(db.name + s) for s in SQLITE_SIDE_FILES)):
        with contextlib.suppress(FileNotFoundError):
            os.chmod(path, 0o600)
