"""`serve-vllm`: TRL's vLLM generation server (command.py); its settings, which `trlstack slurm` takes too, in
settings.py."""

from trlstack.roles.serve.command import main

__all__ = ["main"]
