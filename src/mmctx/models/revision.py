"""What identifies a local checkpoint: a hash of every file's name and content.

File names and sizes are not enough: a fine-tune, or a random build with another seed, keeps
every size. Content digests are cached by (path, size, mtime), so a multi-GB checkpoint is
read in full once, not at every load.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path


def _digest_index() -> Path:
    from mmctx.models import cache_root

    return cache_root() / "file-digests.json"


def file_digest(path: Path) -> str:
    """sha256 of a file's bytes, cached by (resolved path, size, mtime)."""
    path = Path(path)
    stat = path.stat()
    key = f"{path.resolve()}|{stat.st_size}|{stat.st_mtime_ns}"
    index_path = _digest_index()
    try:
        index = json.loads(index_path.read_text())
    except (OSError, ValueError):
        index = {}
    if key not in index:
        digest = hashlib.sha256()
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 24), b""):
                digest.update(block)
        index[key] = digest.hexdigest()
        index_path.parent.mkdir(parents=True, exist_ok=True)
        tmp = index_path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(index))
        os.replace(tmp, index_path)
    return index[key]


def folder_digest(folder: Path) -> str:
    """sha256 over every file's relative path and content digest (hidden bookkeeping skipped)."""
    folder = Path(folder)
    h = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        rel = path.relative_to(folder)
        if any(part.startswith(".") for part in rel.parts):
            continue  # .cache/, .git/: download bookkeeping, not weights
        h.update(rel.as_posix().encode() + b"\x00" + file_digest(path).encode())
    return h.hexdigest()
