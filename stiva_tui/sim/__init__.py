"""The simulated pool: `sim:` models whose strengths are known, served by Stiva itself over the real
OpenAI wire format on 127.0.0.1 (see docs/architecture.md, "Simulated pools").

- `profiles`: the models (a skill per domain, prices, latency, answer length) and the default pool;
- `answers`: which answer a call gets, deterministically (the documented rule);
- `server`: the HTTP server (FastAPI on uvicorn, in a thread of its own);
- `pool`: `--pool sim` as a config, and starting the server for a runtime.

Every figure measured on it is labelled "simulated pool". Nothing here imports Textual or torch.
"""

from .profiles import SIM_LABEL, SimModel, default_models

__all__ = ["SIM_LABEL", "SimModel", "default_models"]
