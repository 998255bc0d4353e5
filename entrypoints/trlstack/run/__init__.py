"""What defines a training run, decided before anything starts; `train` and `trlstack slurm` read it.

- `settings`, `pipeline`: what a run is asked for, each setting a flag and a variable (async-grpo's pipeline
  apart);
- `checks`: the settings' contradictions, several machines, the server's GPUs against the trainer's;
- `passthrough`: what is passed on after `--`, read as the receiving parser reads it (parsers.json);
- `trl_config`: the user's TRL config, checked against the recipe, with the run's overrides; rendered merged;
- `ranks`, `sharding`, `asynchronous`: the training processes, how they share GPUs and shard the model, and
  async-grpo's bounds;
- `outputs`, `checkpoints`, `resume`: the run's output folder, its checkpoints, and whether a run continues
  what the folder holds;
- `stages`: the launch decided in named stages, each a pure function of the settings.

Nothing here imports a role or a command (tests/structure/test_layers.py), nor runs inside a training rank
(that is rank/).
"""
