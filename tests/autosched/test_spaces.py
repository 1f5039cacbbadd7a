"""The tuner's search spaces (``space(sizes)`` of every workload in schedules/): each is a consistent product of
knobs at the smallest and the default preset, nearly every config schedules and computes what the reference
computes, the hand schedules are points of their spaces, and ``Space.validate`` names the knob it refuses.

Run: ``.venv/bin/pytest tests/autosched/test_spaces.py -q``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from oracle import EXACT, assert_close, reduction_len

import tensorlang as tl
from tensorlang import schedules

WORKLOADS = list(schedules.WORKLOADS.values())
RANDOM_CONFIGS = 8  # configs built and run per workload
MAX_REFUSED = 1  # of those, how many may raise ScheduleError


def smallest_preset(w) -> str:
    """The preset the quick tests use: ``"small"`` where the workload has one, else the one with the fewest FLOPs.

    Example::

        >>> smallest_preset(schedules.get("matmul"))
        'small'
    """
    return "small" if "small" in w.presets else min(w.presets, key=lambda p: w.flops(w.presets[p]))


def sample_indices(size: int, seed: int = 0) -> list[int]:
    """:data:`RANDOM_CONFIGS` distinct config indices of a space of ``size`` configs: the first, the last, and the
    rest drawn with a seeded numpy rng (all of them when the space is smaller).

    Example::

        >>> idx = sample_indices(1000)
        >>> len(idx), idx[:2], all(0 <= i < 1000 for i in idx)
        (8, [0, 999], True)
        >>> sorted(sample_indices(3))
        [0, 1, 2]
    """
    rng = np.random.default_rng(seed)
    out = dict.fromkeys([0, size - 1])
    while len(out) < min(RANDOM_CONFIGS, size):
        out.setdefault(int(rng.integers(size)))
    return list(out)


def _presets():
    for w in WORKLOADS:
        for preset in dict.fromkeys((smallest_preset(w), w.default_preset)):
            yield pytest.param(w, preset, id=f"{w.name}-{preset}")


@pytest.mark.parametrize("w,preset", list(_presets()))
def test_space_is_a_consistent_product_of_knobs(w, preset):
    """``w.space(sizes)`` exists; its size is the product of its knobs' value counts, every knob has a value, and
    ``config_at`` / ``index_of`` / ``encode`` / ``decode`` agree.

    Example::

        >>> sp = schedules.get("softmax").space({"N": 4, "D": 8})
        >>> sp.size == math.prod(len(k.values) for k in sp.knobs), sp.index_of(sp.config_at(5))
        (True, 5)
    """
    assert w.space is not None, f"{w.name} has no search space"
    sp = w.space(w.sizes(preset))
    assert sp.knobs, w.name
    assert all(len(k.values) >= 1 for k in sp.knobs), sp.describe()
    assert sp.size == math.prod(len(k.values) for k in sp.knobs)
    assert sp.size >= 2, sp.describe()
    for i in sorted({0, 1, sp.size // 3, sp.size // 2, sp.size - 2, sp.size - 1}):
        cfg = sp.config_at(i)
        assert list(cfg) == [k.name for k in sp.knobs]
        assert sp.validate(cfg) is cfg
        assert sp.index_of(cfg) == i
        assert sp.decode(sp.encode(cfg)) == cfg
    with pytest.raises(ValueError, match="outside"):
        sp.config_at(sp.size)


@pytest.mark.parametrize("w", WORKLOADS, ids=[w.name for w in WORKLOADS])
def test_random_configs_compute_the_reference(w):
    """Eight configs of the space at the smallest preset (the first, the last and six drawn with a seeded rng) are
    scheduled, built and run against the reference; at most one may be refused with ScheduleError.

    Example::

        >>> w = schedules.get("reduce_sum")
        >>> sz = w.sizes("small")
        >>> s = w.space(sz).schedule(tl.op(w.source), sz, w.space(sz).config_at(0))
        >>> X, = w.make_inputs(sz, np.random.default_rng(0))
        >>> bool(np.allclose(tl.build(s)(X), w.reference(X, **sz), rtol=1e-5))
        True
    """
    sizes = w.sizes(smallest_preset(w))
    op = tl.op(w.source)
    sp = w.space(sizes)
    inputs = w.make_inputs(sizes, np.random.default_rng(11))
    want = w.reference(*inputs, **sizes)
    refused = []
    for i in sample_indices(sp.size, seed=len(w.name)):
        cfg = sp.config_at(i)
        try:
            s = sp.schedule(op, sizes, cfg)
        except tl.ScheduleError as e:
            refused.append(f"{cfg}: {e}")
            continue
        got = tl.build(s)(*inputs)
        assert_close(got, want, reduction_len(w.name, sizes), exact=w.name in EXACT, err_msg=f"{w.name} {cfg}")
    assert len(refused) <= MAX_REFUSED, "too many configs refused:\n" + "\n".join(refused)


HAND_CASES = [(w.name, p) for w in WORKLOADS if w.hand_schedule is not None for p in sorted(w.presets)]


@pytest.mark.parametrize("name,preset", HAND_CASES, ids=[f"{n}-{p}" for n, p in HAND_CASES])
def test_hand_config_is_the_hand_schedule(name, preset):
    """The workload's ``hand_config`` lowers to the hand schedule's loop IR at every preset where it gives one
    (lowering only), and it gives one at the default preset.

    Example::

        >>> w = schedules.get("maxpool2d")
        >>> sz = w.sizes("small")
        >>> hand = tl.schedule(tl.op(w.source), **sz)
        >>> w.hand_schedule(hand)
        >>> w.space(sz).schedule(tl.op(w.source), sz, w.hand_config(sz)).lower() == hand.lower()
        True
    """
    w = schedules.get(name)
    sizes = w.sizes(preset)
    cfg = w.hand_config(sizes)
    if cfg is None:
        assert preset != w.default_preset, f"{name}: no hand config at the default preset"
        return
    op = tl.op(w.source)
    hand = tl.schedule(op, **sizes)
    w.hand_schedule(hand)
    sp = w.space(sizes)
    assert sp.allowed(cfg), f"{name} {preset}: the hand config {cfg} breaks {sp.describe()}"
    tuned = sp.schedule(op, sizes, cfg)
    assert str(tuned.lowered()) == str(hand.lowered()), f"{name} {preset}:\nhand:\n{hand}\nconfig:\n{tuned}"


def test_every_hand_schedule_has_its_config():
    """Every workload with a hand schedule has a ``hand_config``, and the matmul one covers its presets but
    ``small`` (48 columns: less than one 64-wide tile).

    Example::

        >>> schedules.get("matmul").hand_config(schedules.get("matmul").sizes("tall_skinny"))["parallel"]
        'io'
    """
    assert all(w.hand_config is not None for w in WORKLOADS if w.hand_schedule is not None)
    mm = schedules.get("matmul")
    assert [p for p in sorted(mm.presets) if mm.hand_config(mm.sizes(p)) is None] == ["small"]


@pytest.mark.parametrize("w", WORKLOADS, ids=[w.name for w in WORKLOADS])
def test_validate_names_the_knob(w):
    """``Space.validate`` (and so ``Space.schedule``) refuses an unknown knob, a missing knob and a value that is not
    one of the knob's, each with a ValueError naming the knob.

    Example::

        >>> sp = schedules.get("transpose").space({"M": 8, "N": 8})
        >>> sp.validate({**sp.config_at(0), "tile": 4})
        Traceback (most recent call last):
        ...
        ValueError: space 'transpose' has no knob 'tile'; knobs: tj, ti, inner, vectorize, pack, parallel
    """
    sizes = w.sizes(smallest_preset(w))
    sp = w.space(sizes)
    good = sp.config_at(0)
    first, last = sp.knobs[0], sp.knobs[-1]
    unknown = {**good, "no_such_knob": 1}
    missing = {k: v for k, v in good.items() if k != first.name}
    bad = {**good, last.name: "not a value"}
    for cfg, knob in ((unknown, "no_such_knob"), (missing, first.name), (bad, last.name)):
        with pytest.raises(ValueError, match=f"'{knob}'"):
            sp.validate(cfg)
        with pytest.raises(ValueError, match=f"'{knob}'"):
            sp.schedule(tl.op(w.source), sizes, cfg)
    with pytest.raises(ValueError, match="dict"):
        sp.validate([good])
