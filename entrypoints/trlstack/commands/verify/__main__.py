"""`python -m trlstack.commands.verify`: verify without the `trlstack` command, as the image build runs it."""

from trlstack.commands.verify.command import main

raise SystemExit(main())
