"""Write a file so that readers see either the old file or the whole new one (temporary name, then rename)."""
from __future__ import annotations

import contextlib
import os
import tempfile


@contextlib.contextmanager
def atomic_file(path: str, mode: str = "w"):
    """`with atomic_file(p) as fh: ...` - on any error the temporary file is removed and `path` is untouched."""
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp_", dir=folder)
    try:
        kwargs = {} if "b" in mode else {"encoding": "utf-8", "newline": ""}
        with os.fdopen(fd, mode, **kwargs) as fh:
            yield fh
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
