"""The roles, the floor above the core: `serve-vllm` (serve.py) and `train` (train.py), the two programs a
stack runs. They import the core (the GPU plan, the settings registry, addresses, ports, GPU discovery, what
defines a run), never a command."""
