"""`python3 -m madengine_rocprof.wrapper [options] -- app args` (also the zipapp's entry point)."""
from madengine_rocprof.wrapper.cli import main

raise SystemExit(main())
