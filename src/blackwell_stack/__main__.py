from blackwell_stack.cli import main

raise SystemExit(main())
