"""`trlstack slurm RECIPE`: one sbatch script that runs a recipe across the nodes of a Slurm cluster.

The first node serves generations (`serve-vllm` with the plan's tensor x data parallel layout on its GPUs),
the other nodes train (`train`, one `accelerate launch` per node, meeting at the first trainer node).
Details: slurm/README.md. Check, then render:

- `settings`: what a job is asked for: trlstack slurm's own flags, the roles' settings as they declare them;
- `layout`: who does what (server and trainer nodes, the GPU plan); `checks`: every check that needs only
  the settings, once, giving the `Job` that rendering takes;
- `render`, `roles`, `shell`: the script, a pure function of the Job; its fixed parts are the shell files
  `prepare.sh` (each node's check, `node-check.sh`, inserted in it) and `supervise.sh` beside these modules;
- `host`: the checks of the submit host (shared storage, sbatch, the runtime);
- `run_folder`: the run's folder made ready on the submit host (room for a checkpoint, another run in it);
- `delivery`: the script printed (--dry-run), written, or written and submitted (--submit);
- `command`: the command line, and the command's steps in order (`run`).
"""

from trlstack.commands.slurm.command import add_arguments, run

__all__ = ["add_arguments", "run"]
