"""Tutorial 4: write a search strategy, plug it in, and compare it with the built-in ones on replay.

A strategy subclasses `tuner.Strategy`: `_propose(n)` returns up to n configs to measure (the base class drops
repeats and configs the space rules out), `observe(observations)` hears what they measured. Replay answers from a
shipped dataset of measured configs, so a comparison over several seeds takes seconds and compiles nothing.
From the shell, put the class in `my_search.py` and run
`tensorlang compare conv2d --replay datasets/conv2d_resnet18_3x3.csv --strategies random,my_search:Annealing ...`
"""
import math
import os
import pathlib

from tensorlang import tuner
from tensorlang.tuner.search.strategies import mutate

TRIALS = int(os.environ.get("TENSORLANG_TUTORIAL_TRIALS", "200"))
DATASET = pathlib.Path(__file__).resolve().parent.parent / "datasets" / "conv2d_resnet18_3x3.csv"


# %% A strategy: simulated annealing
# `_propose` mutates the current config; `observe` decides whether to move to what was measured.
class Annealing(tuner.Strategy):
    """Simulated annealing: measure neighbours of the current config (a few knobs moved); move to a worse one
    with probability exp(-drop / temperature), the temperature falling after every observation."""

    name = "annealing"

    def __init__(self, space, seed=0, temperature=0.2, cooling=0.98, **kw):
        super().__init__(space, seed, **kw)
        self.temperature, self.cooling = temperature, cooling
        self.current, self.score = None, 0.0

    def _propose(self, n):
        if self.current is None:
            return self.random_unseen(n)
        genes = self.space.encode(self.current)
        return [self.space.decode(mutate(genes, self.space, self.rng, rate=0.25)) for _ in range(n)]

    def observe(self, observations):
        super().observe(observations)
        best = max((o.gflops for o in self.history if o.valid), default=1.0)
        for o in observations:
            score = (o.gflops or 0.0) / best   # throughput relative to the best so far; invalid = 0
            if self.current is None or score >= self.score or \
                    self.rng.random() < math.exp((score - self.score) / self.temperature):
                self.current, self.score = o.config, score
            self.temperature *= self.cooling


# %% Register it and compare it on replay
# Replay answers every config from the shipped dataset, so five seeds of three strategies take seconds.
tuner.register_strategy("annealing", Annealing)   # or an entry point, or --strategies my_search:Annealing

result = tuner.compare(["random", "genetic", "annealing"], trials=TRIALS, seeds=5, replay=str(DATASET))
print(result.table())
stats = result.stats()
assert stats["annealing"]["best"] > 0.5 * result.best_known, stats
