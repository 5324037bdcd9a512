"""``python -m kvbudget.cli``: the ``kvbudget`` command."""

from kvbudget.cli import main

raise SystemExit(main())
