"""trlstack: TRL's training speed-ups as pinned images, compose stacks and a Nix shell.

The package stands in floors, each importing only those below it (tests/structure/test_layers.py holds them):

- the core, the modules here and plan/, recipes/: the GPU plan, the settings registry (options.py,
  option_types.py), addresses, ports, GPU discovery (gpus.py), precision and attention (policy.py), the
  recipes' declarations (recipes/), and what the roles share (command.py, models.py, ...);
- run/: what defines a training run, decided before launch: its settings and checks, its TRL config, ranks,
  sharding, its output folder, and the launch's stages;
- rank/: what runs inside each training rank (the recipes' runner and its hooks, our recipe scripts);
- roles/: the two programs a stack runs, `serve-vllm` and `train`;
- commands/: the `trlstack` commands, none importing another;
- cli.py (and __main__.py): the dispatcher, which imports a command by name when it runs.
"""

__version__ = "0.1.0"
