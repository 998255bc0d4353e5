"""The `trlstack` commands, the top floor: each module or package here is one command (`add_arguments`,
`run`) that cli.py imports by name. A command imports the core and the roles, never another command: what two
commands share lives a floor down."""
