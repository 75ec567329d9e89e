from madengine_rocprof.cli import main

raise SystemExit(main())
