"""``python -m app.cli``: the ``dexlite`` command."""

from app.cli import main

raise SystemExit(main())
