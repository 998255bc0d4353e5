"""`python -m trlstack.verify`: verify without the `trlstack` command, as the image build runs it."""

from trlstack.verify.command import main

raise SystemExit(main())
