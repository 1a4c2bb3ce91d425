"""The contract every layer speaks: the workflow format, token usage, the event stream, the
`RunState` fold over it, the typed `Trace` of a stored run, and the shared vocabulary.

Nothing in here does I/O or imports another Stiva package.
"""
