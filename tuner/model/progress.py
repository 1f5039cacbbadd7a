"""What ``tune_model`` shows while it works: a line per stage, a bar of trials, a line per round and now and then a
table of the tasks.

Example::

    progress = Progress(sys.stderr, total=2000)
    progress.say("tuning resnet18: 21 tasks")
"""
from __future__ import annotations

import sys

from .report import ModelTuneSummary, TaskReport, task_table


class Progress:
    """What ``tune_model`` shows while it works, on `stream` (stderr): a line per stage, a tqdm bar of trials with
    the estimated end-to-end latency and the current task, a line per round, and every `table_every` rounds (and
    after the warm-up) a table of each task's best. ``None`` stream: silent.

    Example::

        progress = Progress(sys.stderr, total=2000)
    """

    def __init__(self, stream=sys.stderr, total: int = 0, initial: int = 0, table_every: int = 10):
        self.stream, self.total, self.initial, self.table_every = stream, total, initial, table_every
        self._bar = None

    def say(self, text: str) -> None:
        """Print one line (above the bar, if there is one)."""
        if self.stream is None:
            return
        if self._bar is not None:
            self._bar.write(text, file=self.stream)
        else:
            print(text, file=self.stream, flush=True)

    def start_bar(self, initial: int) -> None:
        """Start the bar of trials at `initial`."""
        if self.stream is None:
            return
        from tqdm import tqdm
        self._bar = tqdm(total=self.total, initial=min(initial, self.total), file=self.stream, unit="trial",
                         dynamic_ncols=True, leave=True)

    def round(self, summary: ModelTuneSummary, task: TaskReport, added: int, before: float | None,
              estimate: float, tasks: list[TaskReport], rounds: int, warmup_done: bool) -> None:
        """After a round of `task`: move the bar, print the round's line (and the table now and then)."""
        if self.stream is None:
            return
        if self._bar is not None:
            self._bar.update(added)
            self._bar.set_postfix_str(f"est. {estimate * 1e3:.3f} ms, task {task.index} {task.name}", refresh=True)
        best = "-" if task.best_s is None else f"{task.best_s * 1e3:.4f} ms"
        change = ""
        if before and task.best_s and task.best_s < before:
            change = f" ({(task.best_s / before - 1) * 100:+.0f}%)"
        self.say(f"round {rounds}: task {task.index} {task.name} x{task.weight}: {added} trials ({task.trials} in "
                 f"all), best {best}{change}; estimated end-to-end {estimate * 1e3:.3f} ms")
        if warmup_done or (self.table_every and rounds % self.table_every == 0):
            self.say(task_table(tasks, estimate))

    def close(self) -> None:
        """Finish the bar."""
        if self._bar is not None:
            self._bar.close()
            self._bar = None
