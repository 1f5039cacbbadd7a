"""Why a config of a generated space cannot be scheduled well: :class:`Problem`, one per reason, typed by kind.

A problem names the stage it is about and the other stages or tensors it involves, so that the zero-trial pick's
repairs decide what to relax from those fields; its text is what users see (``str(problem)``).

>>> p = Problem("O", ProblemKind.PACK_SOURCE, "O: packs P, which is not computed at the root", ("P",))
>>> str(p), p.concerns("P"), p.kind in PACK_KINDS
('O: packs P, which is not computed at the root', True, True)
"""
from __future__ import annotations

import enum
from dataclasses import dataclass


class ProblemKind(enum.Enum):
    """What a :class:`Problem` is about."""

    EPILOGUE = "epilogue"                        # computed in a producer's write-back, the producer not at the root
    AT_READERS = "at readers"                    # computed inside a reader, its readers in no one root stage's loops
    AT_LOOP = "at loop"                          # computed inside a stage none of whose loops runs over what it needs
    PARALLEL_LOOPS = "parallel loops"            # a parallel choice without the loops it splits
    PACK_LOOP = "pack loop"                      # a pack with no block loop to copy at
    PACK_SOURCE = "pack source"                  # a pack of a stage that is not in memory whole
    ACCUMULATORS = "accumulators"                # a register tile of more vector accumulators than registers
    PARALLEL_ITERATIONS = "parallel iterations"  # fewer parallel iterations than threads
    WORKING_SET = "working set"                  # a register tile whose working set exceeds L2


PACK_KINDS = frozenset({ProblemKind.PACK_LOOP, ProblemKind.PACK_SOURCE})
"""The kinds of problem a pack makes."""


@dataclass(frozen=True)
class Problem:
    """One reason a config cannot be scheduled well: the stage it is about, its kind, the message users see, and
    the other stages or tensors it involves (the tensor a pack copies, the other stages computed at the same loop
    and the stage whose loop that is).

    >>> p = Problem("mx", ProblemKind.AT_LOOP, "mx, sm at Y: no loop of Y runs over only what they depend on",
    ...             ("sm", "Y"))
    >>> p.concerns("sm"), p.concerns("X"), f"{p}"
    (True, False, 'mx, sm at Y: no loop of Y runs over only what they depend on')
    """

    stage: str
    kind: ProblemKind
    text: str
    others: tuple[str, ...] = ()

    def __str__(self) -> str:
        return self.text

    def concerns(self, name: str) -> bool:
        """Whether the problem is about stage `name` or involves it."""
        return name == self.stage or name in self.others
