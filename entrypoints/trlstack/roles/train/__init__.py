"""`train RECIPE`: run a TRL recipe with `accelerate launch`, generating with the vLLM server.

Decisions are pure (`launch.build_launch`: settings + config + GPUs -> command and merged config); main() does
the side effects in order, so bad input stops before anything starts: read the config, probe the GPUs, wait
for the server and check its weight-transfer engine, write the merged config, then run accelerate as a child
that a stop signal ends with a checkpoint (roles/train/stopping.py). The modules:

- `settings`: what train is asked for, each setting a flag and a variable;
- `checks`: the settings' contradictions, several machines, the server's GPUs against the trainer's;
- `launch`: the decision, the accelerate command and the merged config;
- `preflight`: what is checked just before the run starts: the other run in the output folder, the model the
  server serves;
- `main`: the command line, and the side effects in order.
"""

from trlstack.roles.train.main import main

__all__ = ["main"]
