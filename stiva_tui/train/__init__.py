"""`stiva train`: GRPO (TRL) with a LoRA adapter, so the conductor learns the pool.

`trainer.py` sets up TRL and PEFT; `rollout.py` samples plans under the grammar, runs them on the
pool through the engine, grades and rewards them.
"""
