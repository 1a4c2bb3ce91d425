"""Schema V8: branches of a run (engine/fork.py), kept under the run they fork.

A branch is a run row of its own, whose `fork_of` names the run it forks and `fork_round`,
`fork_step` (0-based) the step it ran again; `branch` numbers the run's branches from 1. Deleting
a run deletes its branches. Every older run has NULL there: a run of its own. Appended to
`schema.MIGRATIONS`; never edited.
"""

V8 = """
ALTER TABLE runs ADD COLUMN fork_of TEXT REFERENCES runs (id) ON DELETE CASCADE;
ALTER TABLE runs ADD COLUMN fork_round INTEGER;
ALTER TABLE runs ADD COLUMN fork_step INTEGER;
ALTER TABLE runs ADD COLUMN branch INTEGER;
CREATE INDEX runs_fork_of ON runs (fork_of, branch) WHERE fork_of IS NOT NULL;
"""
