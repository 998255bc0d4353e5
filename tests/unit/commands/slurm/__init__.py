"""Tests of trlstack.commands.slurm, one file a module: the settings, layout, checks, the script (render,
the roles'
lines, the shell parts prepare.sh and supervise.sh, run with stand-ins), the submit host and the command."""
