"""What runs inside each training rank, under `accelerate launch`: the runner every recipe's script runs
through (`run`: a stop signal ends training with a checkpoint), the hooks it installs (`push_guard`,
`kv_cache`, `async_guard`, `tree_kernel`), the reward functions a config names (`rewards`), and our own
recipe scripts (`online_dpo`, `async_grpo`). These import TRL, transformers and torch; nothing that decides
a run before launch imports them.
"""
