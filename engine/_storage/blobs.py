"""Object storage for hard-delete values: one file per (Flow ID, Attribute key).

The value never enters the database or history; the Attribute row only marks that a blob
exists. Deleting removes the file, so nothing can recover the value afterwards.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
from pathlib import Path


class FileBlobStore:
    """Stores hard-delete values as files under ``root``."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)

    def _path(self, flow_id: str, key: str) -> Path:
        flow = hashlib.sha256(flow_id.encode()).hexdigest()
        name = hashlib.sha256(key.encode()).hexdigest()
        return self.root / flow[:2] / flow / name

    def put(self, flow_id: str, key: str, data: str) -> None:
        """Write ``data`` durably (write to a temporary file, fsync, rename)."""
        path = self._path(flow_id, key)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        with open(tmp, "w", encoding="utf-8") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)

    def get(self, flow_id: str, key: str) -> str | None:
        """Return the stored value, or None when there is none."""
        try:
            return self._path(flow_id, key).read_text(encoding="utf-8")
        except FileNotFoundError:
            return None

    def delete(self, flow_id: str, key: str) -> bool:
        """Delete the value permanently; return True when one existed."""
        with contextlib.suppress(FileNotFoundError):
            self._path(flow_id, key).unlink()
            return True
        return False

    def delete_flow(self, flow_id: str) -> None:
        """Delete every stored value of ``flow_id`` (the Flow was purged)."""
        shutil.rmtree(self._path(flow_id, "").parent, ignore_errors=True)

    def exists(self, flow_id: str, key: str) -> bool:
        """Return True when a value is stored."""
        return self._path(flow_id, key).exists()
