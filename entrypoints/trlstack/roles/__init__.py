"""The roles, the floor above the core and run/: `serve-vllm` (the serve/ package) and `train` (the train/
package), the two programs a stack runs, with their shared command line (command_line.py). Each does its side
effects in order over decisions made below it; a role's settings module is all a command may read of it."""
