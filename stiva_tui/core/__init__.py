"""The contract every layer speaks: the workflow format, token usage, the event stream, the
`RunState` fold over it, the typed `Trace` of a stored run, the shared vocabulary, and how every
view writes money, durations and step numbers (`format`).

Nothing in here does I/O or imports another Stiva package.
"""
