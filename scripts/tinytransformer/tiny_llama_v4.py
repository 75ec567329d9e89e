"""TinyTransformer v4 entry point: the shared harness with --version v4 (all other flags pass through)."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tt_harness import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(["--version", "v4"] + sys.argv[1:]))
