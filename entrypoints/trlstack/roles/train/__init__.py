"""`train RECIPE`: run a TRL recipe with `accelerate launch`, generating with vLLM (a server, or inside the
trainer).

What the run is and how it launches is decided in run/ (run/stages.py, run/launch.py: settings + config + GPUs
-> accelerate's command and the merged config, pure); this role does the side effects in order, so bad input
stops before anything starts: read the settings and the config, find the GPUs, decide the launch, check the
task, wait for the server and check its weight-transfer engine, write the merged config, then run accelerate
as a child that a stop signal ends with a checkpoint. The modules:

- `main`: the command line, and the side effects in order;
- `preflight`: the model the server serves, checked against the one trained;
- `health`: the wait for the server's /health, and its weight-transfer engine;
- `stopping`: accelerate as a child; a stop signal becomes a checkpoint;
- `reports`: what train says when a rank ended the run early and left why (a full disk, a reward that raised).
"""

from trlstack.roles.train.main import main

__all__ = ["main"]
