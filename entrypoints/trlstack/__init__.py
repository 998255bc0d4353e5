"""trlstack: TRL's training speed-ups as pinned images, compose stacks and a Nix shell."""

__version__ = "0.1.0"
