"""Where a user's registered files live: $MADENGINE_ROCPROF_HOME, default ~/.config/madengine-rocprof (standard
library only, so that `report` can find the registered kernel rules without importing the registry's models)."""

from __future__ import annotations

import os
from pathlib import Path


def user_home() -> Path:
    return Path(os.environ.get("MADENGINE_ROCPROF_HOME") or Path.home() / ".config" / "madengine-rocprof")
