"""The roles, the floor above the core: `serve-vllm` (serve.py) and `train` (the train/ package), the two
programs a stack runs, with their shared command line (command_line.py). They import the core (the GPU plan,
the settings registry, addresses, ports, GPU discovery, what defines a run), never a command."""
