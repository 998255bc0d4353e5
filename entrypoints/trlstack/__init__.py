"""trlstack: TRL's training speed-ups as pinned images, compose stacks and a Nix shell.

The package stands in floors, each importing only those below it (tests/structure/test_layers.py holds them):

- the core, the modules here and plan/, recipes/: the GPU plan, the settings registry (options.py,
  option_types.py), addresses, ports, GPU discovery (gpus.py), what defines a run (recipes/, trainconfig.py,
  outputs.py, checkpoints.py) and what the roles share (command.py, health.py, stopping.py, policy.py, ...);
- roles/: the two programs a stack runs, `serve-vllm` and `train`;
- commands/: the `trlstack` commands, none importing another;
- cli.py (and __main__.py): the dispatcher, which imports a command by name when it runs.
"""

__version__ = "0.1.0"
