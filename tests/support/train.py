"""What `Rollouts` reads of TRL's trainer, for rollout tests that train nothing."""

from __future__ import annotations


class StubTrainer:
    class model:
        training = False

        @staticmethod
        def eval():
            return None

        @staticmethod
        def parameters():
            import torch

            return iter([torch.zeros(1)])
