"""The config file `stiva config` writes when there is none: every section, commented out, so the
file is valid as it is (all defaults) and says what can be set. See docs/configuration.md."""

TEMPLATE = """# Stiva's configuration. Every line below is a default, commented out: uncomment to change it.
# Unknown keys are errors, so a typo never silently changes anything. docs/configuration.md explains each.

# These two stay above every [section] (below one, TOML would put them in it).
# theme = "stiva-dark"
# enter_sends = false         # true: enter sends the question, alt+enter adds a line
#                             # (false: enter adds a line, ctrl+j or alt+enter sends)

# [conductor]
# backend = "auto"            # auto | local | embedded | remote
# model = "Qwen/Qwen2.5-7B-Instruct"   # local: HF id or folder; remote: a pool model id
# max_steps = 5
# rounds = 1
# prefer = "balanced"         # best | balanced | cheap | fast | 0 (best) .. 1 (cheap); ctrl+f per question
# structured = "auto"        # remote: the plan's JSON schema to the server: auto (discovered
#                             # local servers) | json_schema | vllm | sglang | none (docs/scale.md)
# router = "~/routers/mine"   # a one-pass router (stiva train router): conductor-mini routes with it
# router_escalate_below = 0   # where the router's best chance is under this, the full conductor plans
# fallback_model = ""         # a pool model id: answers in one step when a plan cannot run, unless
#                             # your benches' recorded accuracy picks one ("": the priciest model)
# decode = "hf"               # local: hf | eager | static | compiled, each may add +jump (forced
#                             # tokens in one pass): the same plans, speed only (docs/measurements.md)
# quant = "nf4"               # local on a GPU: nf4 (bitsandbytes) | int4 (torchao: 'stiva-tui[fast]')

# A provider of your own (any OpenAI-compatible endpoint) and its models; keys go in the keyring
# (F5 in the app) or in the environment variable you name, never in this file.
# [[providers]]
# name = "mylab"
# base_url = "http://127.0.0.1:8000/v1"
# api_key_env = "MYLAB_KEY"
#
# [[models]]
# id = "lab-qwen"
# provider = "mylab"
# model = "Qwen/Qwen3-32B"
# price_in = 0.10             # USD per 1M input tokens
# price_out = 0.30            # USD per 1M output tokens
# description = "strong at math and code"

# [budget]
# usd = 1.0                   # stop a run once it has cost this much

# [workers]
# timeout_s = 120.0
# retries = 2
# max_answer_kb = 1024        # one call's answer at most (KiB); a longer one fails the call

# Local servers (Ollama, vLLM, llama.cpp, LM Studio) on this machine join the pool when they answer
# on their default ports; one that runs as another login user is left out (docs/security.md). The
# app looks again every 30 s and says which server came or went.
# [discovery]
# enabled = true              # false: only the servers named under [[providers]]
# timeout_s = 0.3             # how long each probe waits
# ports = { ollama = 11434, vllm = 8000, llamacpp = 8080, lmstudio = 1234 }   # 0: not looked for

# How votes and cascades compare open answers (no short final answer): "text" agrees where the
# answers are nearly the same words, with no call; "judge" also asks the cheapest pool model.
# [workflows]
# open_agreement = "text"     # text | judge (docs/conductor.md, "Open questions")

# [ask]
# warm_idle_s = 600           # stiva ask keeps the model loaded this long between asks (0: never)

# [keymap]
# send = "ctrl+s"             # binding ids: F1 in the app lists them
"""
