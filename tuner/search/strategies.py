"""Search strategies behind one interface: ``propose(n)`` returns up to ``n`` configs never proposed before, and
``observe(observations)`` tells the strategy what they measured. Strategies are registered by name.

Built in: ``random``, ``grid``, ``genetic``, ``bayesian`` (optuna ask/tell; TPE unless another optuna sampler is
named) and ``xgb-genetic`` (evolve on the cost model's predictions, measure the best predicted plus a share of
random exploration). The same seed and the same observations give the same proposals.

Example::

    >>> from tensorlang.space import Knob, Space
    >>> sp = Space("toy", [Knob("a", (1, 2, 3)), Knob("b", (1, 2))], lambda s, c: None)
    >>> st = make_strategy("grid", sp, seed=0)
    >>> st.propose(2)
    [{'a': 1, 'b': 1}, {'a': 1, 'b': 2}]
    >>> st.observe([Observation({'a': 1, 'b': 1}, 3.0), Observation({'a': 1, 'b': 2}, None, "wrong")])
    >>> len(st.propose(10))
    4
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from tensorlang.errors import UsageError
from tensorlang.space import Space, config_key
from tensorlang.tuner.search.costmodel import CostModel, make_cost_model

__all__ = [
    "STRATEGIES",
    "Observation",
    "Strategy",
    "featurize_all",
    "make_strategy",
    "optuna_samplers",
    "register_strategy",
    "sampler_problem",
]


@dataclass(frozen=True)
class Observation:
    """One measured config: its throughput in GFLOPS, or None and the error kind when it is not valid.

    Example::

        >>> Observation({"a": 1}, None, "crash").valid
        False
    """

    config: dict
    gflops: float | None
    error_kind: str | None = None

    @property
    def valid(self) -> bool:
        """Measured and checked."""
        return self.gflops is not None


class Strategy:
    """The interface every strategy implements (subclass it and register it with :func:`register_strategy`).

    Arguments: ``space`` (a :class:`tensorlang.space.Space`), ``seed``; model-guided strategies also get a
    ``cost_model`` (a :class:`tensorlang.tuner.search.costmodel.CostModel`) and ``featurize(config) -> feature vector or
    None`` (which may also offer ``featurize.many(configs)`` for a batch: see :func:`featurize_all`). Subclasses
    implement ``_propose(n)`` and may extend ``observe``. The base class keeps ``seen`` (every config key proposed or
    observed, so nothing is measured twice) and ``history`` (every observation, in order).
    """

    name = "base"

    def __init__(self, space: Space, seed: int = 0, cost_model: CostModel | None = None,
                 featurize: Callable[[dict], np.ndarray | None] | None = None, **options):
        if options:
            raise UsageError(f"strategy {self.name!r} has no option {sorted(options)[0]!r}")
        self.space = space
        self.seed = seed
        self.rng = np.random.default_rng(seed)
        self.cost_model = cost_model
        self.featurize = featurize
        self.seen: set[str] = set()
        self.history: list[Observation] = []

    def propose(self, n: int) -> list[dict]:
        """Up to ``n`` configs to measure next, none proposed before and all admitted by the space's constraint
        (fewer when the space runs out)."""
        out: list[dict] = []
        for _ in range(20):  # a strategy unaware of the constraint is asked again for what it ruled out
            want = n - len(out)
            if want <= 0:
                break
            got = self._propose(want)
            if not got:
                break
            for proposed in got:
                # configs that schedule alike (a knob of a stage that is inlined, say) are one config: the space's
                # canonical form of it is what is measured, so that no schedule is measured twice
                c = self.space.canonical(proposed)
                k = config_key(c)
                if c != proposed:
                    if k in self.seen:
                        self._rejected(proposed)
                        continue
                    self._canonicalized(proposed, c)
                if k in self.seen:
                    continue
                self.seen.add(k)
                if self.space.allowed(c):
                    out.append(c)
                    continue
                sub = self.space.nearest(c, self.seen)
                if sub is None:
                    self._rejected(c)
                else:  # replay: the nearest config of the table stands in for one it does not hold
                    self.seen.add(config_key(sub))
                    self._substituted(c, sub)
                    out.append(sub)
        return out[:n]

    def _rejected(self, config: dict) -> None:
        """Called for a proposed config the space's constraint rules out (it is never measured)."""

    def _substituted(self, config: dict, substitute: dict) -> None:
        """Called when the space measures ``substitute`` in place of the proposed ``config`` (on replay, the
        nearest config the dataset holds)."""

    def _canonicalized(self, config: dict, canonical: dict) -> None:
        """Called when the proposed ``config`` is measured as the space's ``canonical`` form of it (they schedule
        alike): its result is ``config``'s too. By default the same as a substitute."""
        self._substituted(config, canonical)

    def _propose(self, n: int) -> list[dict]:
        raise NotImplementedError

    def observe(self, observations: Sequence[Observation]) -> None:
        """Record what was measured (also used to warm-start from earlier records). A config measured in a form
        that is not the space's canonical one (a start config, a record of an older version of the space) counts
        as its canonical form too, so that the same schedule is not proposed again."""
        for o in observations:
            self.seen.add(config_key(o.config))
            self.seen.add(config_key(self.space.canonical(o.config)))
            self.history.append(o)


    def random_unseen(self, n: int, exclude: set[str] | None = None) -> list[dict]:
        """Up to ``n`` distinct uniformly random configs not yet seen (nor in ``exclude``), each in the space's
        canonical form (:meth:`Space.canonical`), so that none schedules like a config already seen."""
        exclude = set(self.seen) | (exclude or set())
        out: list[dict] = []
        huge = self.space.size > WALK_LIMIT  # a generated space: each `allowed` plans loops (about a millisecond)
        draws = min(200 * max(n, 1), 2000 + 20 * n) if huge else 200 * max(n, 1)
        for _ in range(draws):  # rejection sampling while the space is far from used up
            if len(out) >= n:
                return out
            c = self.space.canonical(self.space.random(self.rng))
            k = config_key(c)
            if k not in exclude and self.space.allowed(c):
                exclude.add(k)
                out.append(c)
        if huge:  # a generated space (10^9 configs and more): walking it never ends
            return out
        free = [c for c in self.space.allowed_configs() if config_key(c) not in exclude]
        picks = self.rng.permutation(len(free))[: n - len(out)] if free else []
        return out + [free[int(i)] for i in picks]

    def valid_history(self) -> list[Observation]:
        """The valid observations, best first (ties in observation order)."""
        return sorted((o for o in self.history if o.valid), key=lambda o: -o.gflops)


#: the most configs :meth:`Strategy.random_unseen` walks through when rejection sampling finds too few
WALK_LIMIT = 200_000


def featurize_all(featurize: Callable, configs: list[dict]) -> list[np.ndarray | None]:
    """``[featurize(c) for c in configs]``, through ``featurize.many(configs)`` where the function offers one
    (the tuner's computes a batch on its idle builder processes).

    Example::

        >>> def f(c):
        ...     return np.array([c["a"]])
        >>> f.many = lambda cs: [np.array([2 * c["a"]]) for c in cs]
        >>> [v.tolist() for v in featurize_all(f, [{"a": 1}, {"a": 2}])]
        [[2], [4]]
    """
    many = getattr(featurize, "many", None)
    return list(many(configs)) if many is not None else [featurize(c) for c in configs]


class RandomSearch(Strategy):
    """Uniformly random configs, without repeats."""

    name = "random"

    def _propose(self, n: int) -> list[dict]:
        return self.random_unseen(n)


class GridSearch(Strategy):
    """Every config in the space's order (the last knob varies fastest), skipping those already seen."""

    name = "grid"

    def __init__(self, space: Space, seed: int = 0, **kw):
        super().__init__(space, seed, **kw)
        self._next = 0

    def _propose(self, n: int) -> list[dict]:
        out = []
        while len(out) < n and self._next < self.space.size:
            c = self.space.config_at(self._next)
            self._next += 1
            if config_key(c) not in self.seen:
                out.append(c)
        return out


def crossover(a: np.ndarray, b: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Uniform crossover of two encoded configs: each knob from either parent with probability 1/2.

    Example::

        >>> child = crossover(np.array([0, 0, 0]), np.array([1, 1, 1]), np.random.default_rng(0))
        >>> set(child.tolist()) <= {0, 1}
        True
    """
    return np.where(rng.random(len(a)) < 0.5, a, b)


def mutate(genes: np.ndarray, space: Space, rng: np.random.Generator, rate: float) -> np.ndarray:
    """Each knob moves with probability ``rate`` (at least one moves): half the time to a neighbouring value
    (the knobs' values are ordered), otherwise to any value.

    Example::

        >>> from tensorlang.space import Knob
        >>> sp = Space("toy", [Knob("a", (1, 2, 3))], lambda s, c: None)
        >>> mutate(np.array([0]), sp, np.random.default_rng(0), rate=0.0).tolist() != [0]
        True
    """
    out = genes.copy()
    sizes = [len(k.values) for k in space.knobs]
    movable = [i for i, s in enumerate(sizes) if s > 1]
    if not movable:
        return out
    chosen = [i for i in movable if rng.random() < rate] or [movable[int(rng.integers(len(movable)))]]
    for i in chosen:
        if rng.random() < 0.5:
            step = 1 if rng.random() < 0.5 else -1
            out[i] = min(max(out[i] + step, 0), sizes[i] - 1)
            if out[i] == genes[i]:
                out[i] = genes[i] - step
        else:
            choices = [v for v in range(sizes[i]) if v != genes[i]]
            out[i] = choices[int(rng.integers(len(choices)))]
    return out


class GeneticSearch(Strategy):
    """A steady-state genetic algorithm on measured throughput: the population is the best ``population``
    configs measured so far (elitism: the best survive until beaten), parents are picked by tournament, children
    come from uniform crossover and mutation, and only unseen children are proposed. Random until two configs
    are valid."""

    name = "genetic"

    def __init__(self, space: Space, seed: int = 0, population: int = 32, tournament: int = 3,
                 mutation_rate: float | None = None, **kw):
        super().__init__(space, seed, **kw)
        self.population = population
        self.tournament = tournament
        self.mutation_rate = mutation_rate if mutation_rate is not None else 1.0 / max(1, len(space.knobs))

    def _parents(self) -> tuple[np.ndarray, np.ndarray]:
        best = self.valid_history()[: self.population]
        genes = np.array([self.space.encode(o.config) for o in best])
        fitness = np.array([o.gflops for o in best])
        return genes, fitness

    def _pick(self, fitness: np.ndarray) -> int:
        entrants = self.rng.integers(len(fitness), size=min(self.tournament, len(fitness)))
        return int(entrants[np.argmax(fitness[entrants])])

    def children(self, genes: np.ndarray, fitness: np.ndarray, n: int, exclude: set[str]) -> list[dict]:
        """Up to ``n`` new unseen children of the parents ``genes`` with ``fitness`` (not in ``exclude``), in the
        space's canonical form: a child that differs from a config seen only in knobs it leaves unused is not new
        (in a generated space whose epilogue stage is fused, most of a stage's knobs are unused, and most children
        would be such repeats, each costing a round of proposing)."""
        out: list[dict] = []
        keys = set(exclude)
        for _ in range(50 * n):
            if len(out) >= n:
                break
            a, b = genes[self._pick(fitness)], genes[self._pick(fitness)]
            child = crossover(a, b, self.rng)
            if self.rng.random() < 0.9 or (child == a).all() or (child == b).all():
                child = mutate(child, self.space, self.rng, self.mutation_rate)
            c = self.space.canonical(self.space.decode(child))
            k = config_key(c)
            if k not in keys and k not in self.seen:
                keys.add(k)
                out.append(c)
        return out

    def _propose(self, n: int) -> list[dict]:
        genes, fitness = self._parents()
        if len(genes) < 2:
            return self.random_unseen(n)
        out = self.children(genes, fitness, n, set())
        return out + self.random_unseen(n - len(out), {config_key(c) for c in out})


_SUBSTITUTE = object()  # a pending config that replaced optuna's own proposal: added as a trial when observed


def optuna_samplers() -> list[str]:
    """The optuna sampler classes :class:`BayesianSearch` can make: those that take a ``seed`` and need no other
    argument (``GridSampler`` needs its grid, ``PartialFixedSampler`` its fixed values: they are left out).

    Example::

        >>> names = optuna_samplers()
        >>> "TPESampler" in names, "GridSampler" in names, "BaseSampler" in names
        (True, False, False)
    """
    import inspect

    import optuna
    out = []
    for name in dir(optuna.samplers):
        cls = getattr(optuna.samplers, name)
        if not (name.endswith("Sampler") and not name.startswith("Base") and isinstance(cls, type)):
            continue
        params = inspect.signature(cls).parameters
        needs = [p for p in params.values() if p.default is p.empty and p.name != "seed"
                 and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
        if "seed" in params and not needs:
            out.append(name)
    return out


def sampler_problem(name: str) -> str:
    """Why ``name`` is not one of :func:`optuna_samplers`, as a phrase for an error message.

    Example::

        >>> sampler_problem("GridSampler"), sampler_problem("NoSampler")
        ("optuna's GridSampler needs more arguments than a seed", "optuna has no sampler 'NoSampler'")
    """
    import optuna
    if isinstance(getattr(optuna.samplers, name, None), type) and not name.startswith("Base"):
        return f"optuna's {name} needs more arguments than a seed"
    return f"optuna has no sampler {name!r}"


class BayesianSearch(Strategy):
    """optuna's ask/tell with one categorical parameter per knob, maximising GFLOPS (invalid configs count 0).

    ``sampler`` names any optuna sampler class (default ``TPESampler``, with ``constant_liar`` so that a batch
    asked before any is told spreads out); it gets ``seed``. A config optuna asks for again is told its known
    value (or, while pending, dropped as failed) and asked anew; after 20 repeats in a row the slot is filled
    with a random unseen config, counted in ``random_fills``.
    """

    name = "bayesian"

    def __init__(self, space: Space, seed: int = 0, sampler: str = "TPESampler", **kw):
        super().__init__(space, seed, **kw)
        import optuna
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        legal = optuna_samplers()
        if sampler not in legal:
            raise UsageError(f"bayesian: {sampler_problem(sampler)}; samplers: {', '.join(legal)}")
        cls = getattr(optuna.samplers, sampler)
        args = {"seed": seed}
        if sampler == "TPESampler":
            args.update(constant_liar=True, multivariate=True, n_startup_trials=10)
        self._optuna = optuna
        self.study = optuna.create_study(direction="maximize", sampler=cls(**args))
        self.distributions = {k.name: optuna.distributions.CategoricalDistribution(k.values) for k in space.knobs}
        self._pending: dict[str, object] = {}
        self._known: dict[str, float] = {}
        self.random_fills = 0

    def observe(self, observations: Sequence[Observation]) -> None:
        """Record the observations and tell optuna each one's GFLOPS (0 for an invalid config): as the result of
        the trial that asked for it, or, for a config optuna did not ask for (an earlier record, a random fill, a
        replay substitute), as a finished trial of its own."""
        super().observe(observations)
        for o in observations:
            k = config_key(o.config)
            value = o.gflops if o.valid else 0.0
            self._known[k] = value
            trial = self._pending.pop(k, None)
            if trial is not None and trial is not _SUBSTITUTE:
                self.study.tell(trial, value)
            else:  # measured before this strategy existed (resumed tuning), a random fill or a substitute
                self.study.add_trial(self._optuna.trial.create_trial(
                    params=dict(o.config), distributions=self.distributions, value=value))

    def _rejected(self, config: dict) -> None:
        trial = self._pending.pop(config_key(config), None)
        if trial is not None and trial is not _SUBSTITUTE:  # ruled out by the constraint: as bad as invalid
            self._known[config_key(config)] = 0.0
            self.study.tell(trial, 0.0)

    def _substituted(self, config: dict, substitute: dict) -> None:
        trial = self._pending.pop(config_key(config), None)
        if trial is not None and trial is not _SUBSTITUTE:  # optuna learns from the config measured instead,
            self.study.tell(trial, state=self._optuna.trial.TrialState.FAIL)  # added as a trial of its own
        self._pending[config_key(substitute)] = _SUBSTITUTE

    def _canonicalized(self, config: dict, canonical: dict) -> None:
        trial = self._pending.pop(config_key(config), None)
        if trial is not None:  # the trial optuna asked for gets the canonical config's value: they schedule alike
            self._pending[config_key(canonical)] = trial

    def _propose(self, n: int) -> list[dict]:
        out: list[dict] = []
        FAIL = self._optuna.trial.TrialState.FAIL
        while len(out) < n:
            for _ in range(20):
                trial = self.study.ask(self.distributions)
                c = {k.name: trial.params[k.name] for k in self.space.knobs}
                key = config_key(c)
                if key in self._known:
                    self.study.tell(trial, self._known[key])
                elif key in self.seen or key in self._pending:
                    self.study.tell(trial, state=FAIL)
                else:
                    self._pending[key] = trial
                    out.append(c)
                    break
            else:
                fill = self.random_unseen(1, set(self._pending))
                if not fill:
                    break
                self.random_fills += 1
                out.extend(fill)
        return out


class ModelGuidedGenetic(GeneticSearch):
    """``xgb-genetic``: evolve a population on the cost model's predicted throughput for ``generations``
    generations, then propose the best-predicted unseen configs, plus a share ``exploration`` of random ones and,
    in a space with structural knobs (:meth:`tensorlang.space.Space.structural_knobs`), a share ``moves`` of
    structural moves (:meth:`structural_moves`). The model is retrained on every observation batch (features of
    the lowered loop IR; throughput normalised by the best so far, invalid = 0). Random until ``min_train``
    valid configs have been measured."""

    name = "xgb-genetic"

    def __init__(self, space: Space, seed: int = 0, cost_model: CostModel | None = None,
                 featurize: Callable[[dict], np.ndarray | None] | None = None, exploration: float = 0.125,
                 population: int = 64, generations: int = 3, min_train: int = 8, moves: float = 0.25, **kw):
        if featurize is None:
            raise UsageError("xgb-genetic needs featurize(config) -> features")
        super().__init__(space, seed, population=population, cost_model=cost_model or make_cost_model("xgb", seed),
                         featurize=featurize, **kw)
        self.exploration = exploration
        self.generations = generations
        self.min_train = min_train
        self.moves = moves
        self._features: dict[str, np.ndarray | None] = {}
        self._dirty = False

    def features(self, config: dict) -> np.ndarray | None:
        """The config's feature vector (cached; None when the config cannot be scheduled)."""
        k = config_key(config)
        if k not in self._features:
            self._features[k] = self.featurize(config)
        return self._features[k]

    def _featurize_new(self, configs: list[dict]) -> None:
        """Compute the features of the configs not yet cached, as one batch (:func:`featurize_all`)."""
        new = {config_key(c): c for c in configs if config_key(c) not in self._features}
        if new:
            for k, f in zip(new, featurize_all(self.featurize, list(new.values()))):
                self._features[k] = f

    def observe(self, observations: Sequence[Observation]) -> None:
        """Record the observations; the cost model is retrained on the whole history at the next proposal (once
        ``min_train`` valid configs have been measured)."""
        super().observe(observations)
        self._dirty = True

    def _train(self) -> None:
        rows, ys = [], []
        best = max((o.gflops for o in self.history if o.valid), default=0.0)
        self._featurize_new([o.config for o in self.history])
        for o in self.history:
            f = self.features(o.config)
            if f is not None:
                rows.append(f)
                ys.append((o.gflops / best) if (o.valid and best > 0) else 0.0)
        if rows:
            self.cost_model.fit(np.array(rows), np.array(ys))
        self._dirty = False

    def predict(self, configs: list[dict]) -> np.ndarray:
        """Predicted normalised throughput of each config (-1 for one that cannot be scheduled)."""
        self._featurize_new(configs)
        feats = [self.features(c) for c in configs]
        ok = [i for i, f in enumerate(feats) if f is not None]
        scores = np.full(len(configs), -1.0)
        if ok:
            scores[ok] = self.cost_model.predict(np.array([feats[i] for i in ok]))
        return scores

    def _propose(self, n: int) -> list[dict]:
        if sum(o.valid for o in self.history) < self.min_train:
            return self.random_unseen(n)
        if self._dirty:
            self._train()
        if not self.cost_model.trained:
            return super()._propose(n)
        n_explore = int(round(n * self.exploration))
        # start from the best measured and random unseen configs, scored by the model
        genes, fitness = self._parents()
        pool = {config_key(c): c for c in self.random_unseen(self.population)}
        for _ in range(self.generations):
            cand = list(pool.values())
            scores = self.predict(cand)
            order = np.argsort(-scores, kind="stable")[: self.population]
            elite = [cand[i] for i in order]
            pool = {config_key(c): c for c in elite}
            g = np.array([self.space.encode(c) for c in elite] + list(genes))
            f = np.concatenate([scores[order], fitness / max(fitness.max(), 1e-9)])
            for c in self.children(g, f, self.population, set(pool)):
                if self.space.allowed(c):  # one the constraint rules out is never measured: no need to score it
                    pool[config_key(c)] = c
        cand = list(pool.values())
        scores = self.predict(cand)
        order = np.argsort(-scores, kind="stable")
        rivals = self._rival_picks(n)
        moves = self.structural_moves(int(round(n * self.moves)), {config_key(c) for c in rivals})
        taken = {config_key(c) for c in rivals + moves}
        picks = rivals + moves + [cand[i] for i in order if scores[i] > -1 and config_key(cand[i]) not in taken]
        picks = picks[: max(n - n_explore, len(rivals) + len(moves))]
        return picks + self.random_unseen(n - len(picks), {config_key(c) for c in picks})

    def structural_moves(self, n: int, exclude: set[str] = frozenset()) -> list[dict]:
        """Up to `n` unseen configs one structural knob away from the :data:`MOVE_FROM` best measured ones (one
        placement, vector variable or width, or one register tile's extent changed), each of a structure (the values of
        every structural knob) not measured yet: the best-predicted move of each group of
        :meth:`~tensorlang.space.Space.structural_knobs` in turn. The genetic pool alone, culled by the model each
        generation, stays in the structure of the configs measured first, above all with a model trained on other
        tasks (``tensorlang.tuner.search.transfer``), even where a better structure is one knob away (one more
        output block of a register tile; no vector variable where the pick's vector is 2 elements long).

        Example::

            >>> from tensorlang.space import Knob, Space
            >>> class Toy(Space):
            ...     def structural_knobs(self):
            ...         return (("a",),)
            >>> sp = Toy("toy", [Knob("a", (1, 2, 3)), Knob("b", (1, 2))], lambda s, c: None)
            >>> st = ModelGuidedGenetic(sp, featurize=lambda c: np.array([c["a"], c["b"]], dtype=float))
            >>> st.observe([Observation({"a": 1, "b": 1}, 2.0)])
            >>> sorted(c["a"] for c in st.structural_moves(4))
            [2, 3]
        """
        groups = self.space.structural_knobs()
        best = self.valid_history()[:MOVE_FROM]
        if n <= 0 or not groups or not best:
            return []
        names = [k for g in groups for k in g]

        def structure(c: dict) -> tuple:
            return tuple(c.get(k) for k in names)

        measured = {structure(self.space.canonical(o.config)) for o in self.history}
        per_group: list[dict[str, dict]] = []
        for group in groups:
            found: dict[str, dict] = {}
            for o in best:
                for name in group:
                    for v in self.space.knob(name).values:
                        if v == o.config.get(name):
                            continue
                        c = self.space.canonical({**o.config, name: v})
                        k = config_key(c)
                        if k in self.seen or k in exclude or k in found or structure(c) in measured \
                                or not self.space.allowed(c):
                            continue
                        found[k] = c
            per_group.append(found)
        ranked = []
        for found in per_group:
            cand = list(found.values())
            scores = self.predict(cand) if cand else np.zeros(0)
            ranked.append([cand[i] for i in np.argsort(-scores, kind="stable") if scores[i] > -1])
        out: list[dict] = []
        taken: set = set()
        while len(out) < n and any(ranked):
            for r in ranked:
                while r and structure(r[0]) in taken:
                    r.pop(0)
                if r and len(out) < n:
                    c = r.pop(0)
                    taken.add(structure(c))
                    out.append(c)
        return out

    def _rival_picks(self, n: int) -> list[dict]:
        """One config in each rival basin (see ``space.basin``: another loop structure, as Ansor's sketches): the
        best-predicted unseen mutation of that basin's best configs, for the :data:`RIVAL_BASINS` basins whose
        best is within :data:`RIVAL_SHARE` of the best measured, in proposals of at least four. Search otherwise
        spends its trials in the basin of whichever config led early, which need not hold the best configs."""
        basin = getattr(self.space, "basin", None)
        if basin is None or n < 4:
            return []
        valid = self.valid_history()
        if not valid:
            return []
        leader = basin(valid[0].config)
        members: dict[tuple, list[Observation]] = {}
        for o in valid:
            members.setdefault(basin(o.config), []).append(o)
        rivals = [key for key, obs in members.items()
                  if key != leader and obs[0].gflops >= RIVAL_SHARE * valid[0].gflops][:RIVAL_BASINS]
        out: list[dict] = []
        for key in rivals:
            best = members[key][: self.population]
            genes = np.array([self.space.encode(o.config) for o in best])
            fitness = np.array([o.gflops for o in best])
            kids = [c for c in self.children(genes, fitness, 16, {config_key(c) for c in out})
                    if basin(c) == key and self.space.allowed(c)]
            if kids:
                out.append(kids[int(np.argmax(self.predict(kids)))])
        return out


MOVE_FROM = 2  # structural moves start from this many of the best measured configs
RIVAL_SHARE = 0.85  # a basin whose best is at least this share of the best measured keeps a proposal each round
RIVAL_BASINS = 2  # at most this many rival basins at a time

STRATEGIES: dict[str, type] = {
    cls.name: cls for cls in (RandomSearch, GridSearch, GeneticSearch, BayesianSearch, ModelGuidedGenetic)
}


def register_strategy(name: str, cls: type) -> None:
    """Make ``cls`` (a :class:`Strategy` subclass) available as ``name`` (``--strategy name``).

    Example::

        >>> class Mine(RandomSearch):
        ...     name = "mine"
        >>> register_strategy("mine", Mine)
        >>> "mine" in STRATEGIES
        True
        >>> del STRATEGIES["mine"]
    """
    if not isinstance(name, str) or not name or any(ch.isspace() for ch in name):
        raise UsageError(f"a strategy name is a non-empty word, got {name!r}")
    if not (isinstance(cls, type) and issubclass(cls, Strategy)):
        raise UsageError(f"strategy {name!r}: {cls!r} is not a subclass of tensorlang.tuner.search.strategies.Strategy")
    if cls._propose is Strategy._propose and cls.propose is Strategy.propose:
        raise UsageError(f"strategy {name!r}: {cls.__name__} does not implement _propose(n) (is it the abstract "
                         f"base class?)")
    if name in STRATEGIES and STRATEGIES[name] is not cls:
        raise UsageError(f"a strategy called {name!r} is already registered ({STRATEGIES[name].__name__})")
    STRATEGIES[name] = cls


def make_strategy(name: str, space: Space, seed: int = 0, **kw) -> Strategy:
    """A new strategy ``name`` for ``space``: a registered name, a ``package.module:Class`` spec or an entry point
    of the group ``tensorlang.strategies`` (see :mod:`tensorlang.tuner.search.plugins`); UsageError listing the
    registered names when there is none.

    Example::

        >>> from tensorlang.space import Knob
        >>> make_strategy("annealing", Space("t", [Knob("a", (1,))], lambda s, c: None))
        Traceback (most recent call last):
        ...
        tensorlang.errors.UsageError: unknown strategy 'annealing'; strategies: random, grid, ...
    """
    cls = STRATEGIES.get(name) if isinstance(name, str) else None
    if cls is None:
        from tensorlang.tuner.search.plugins import resolve_strategy
        cls = resolve_strategy(name)
    return cls(space, seed, **kw)
