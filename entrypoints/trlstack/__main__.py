"""`python -m trlstack` is the `trlstack` command."""

from trlstack.cli import main

raise SystemExit(main())
