"""Tuning datasets: one task's measured configs as a CSV table with a JSON header, for offline replay.

The first line of the file is ``# tensorlang-dataset `` followed by a JSON object: the format version, the task
(workload, sizes, threads, task key, flops), the target the configs were measured on (triple, CPU name and
features), the search space (its knobs and their values, in order), the tensorlang version, when it was made
and a free-text note. Then comes an ordinary CSV table, one row per distinct config: a column per knob, then
``gflops``, ``median_s`` (both empty for an invalid config), ``error_kind`` (empty when valid) and
``measurements`` (how many records of that config were merged: their median time is kept). Lines starting
with ``#`` are comments, so ``pandas.read_csv(path, comment="#")`` reads the table as it is.

Example::

    >>> import os, tempfile
    >>> from tensorlang.space import Knob
    >>> ds = Dataset({"workload": "toy", "sizes": {"N": 8}, "threads": 1, "flops": 16.0,
    ...               "knobs": {"v": [1, 2]}}, [({"v": 1}, 0.5, None), ({"v": 2}, None, "wrong")])
    >>> path = os.path.join(tempfile.mkdtemp(), "toy.csv")
    >>> ds.save(path)
    >>> back = Dataset.load(path)
    >>> back.lookup({"v": 1}), back.lookup({"v": 2}), back.best_gflops
    ((0.5, None), (None, 'wrong'), 0.5)
"""
from __future__ import annotations

import csv
import io
import json
import math
import os
import statistics
import time
from collections.abc import Iterable

import numpy as np

from tensorlang.errors import UsageError
from tensorlang.space import Knob, Space, config_key
from tensorlang.tuner.records.database import ERROR_KINDS

__all__ = ["FORMAT_VERSION", "MAGIC", "Dataset", "DatasetError", "from_records"]

FORMAT_VERSION = 1
MAGIC = "# tensorlang-dataset "
_STATS = ("gflops", "median_s", "error_kind", "measurements")


class DatasetError(UsageError):
    """A dataset file cannot be read or written: the message names the file, the line and what is wrong."""


def _text(v) -> str:
    """The CSV cell of a knob value: strings as they are, other scalars as JSON (true, 3, 0.5, null)."""
    return v if isinstance(v, str) else json.dumps(v)


class Dataset:
    """A table of measured configs of one task: ``header`` (a dict, see the module docstring) and ``rows``, each
    ``(config, gflops or None, error_kind or None)``; ``median_s`` and ``measurements`` per row are optional.

    Example::

        >>> ds = Dataset({"workload": "toy", "sizes": {}, "threads": 1, "flops": 2.0, "knobs": {"a": ["x", "y"]}},
        ...              [({"a": "x"}, 1.0, None), ({"a": "y"}, 3.0, None)])
        >>> len(ds), ds.valid_count, ds.best_config
        (2, 2, {'a': 'y'})
    """

    def __init__(self, header: dict, rows: Iterable[tuple], path: str | None = None):
        self.header = dict(header)
        self.path = path
        self.knobs: dict[str, list] = {k: list(v) for k, v in self.header["knobs"].items()}
        self._rows: dict[str, tuple] = {}
        for row in rows:
            config, gflops, error_kind = row[:3]
            extra = row[3] if len(row) > 3 else {}
            self._rows[config_key(config)] = (dict(config), gflops, error_kind, dict(extra))

    # ------------------------------------------------------------------ reading
    def __len__(self) -> int:
        return len(self._rows)

    @property
    def workload(self) -> str:
        """The workload's name."""
        return self.header["workload"]

    @property
    def sizes(self) -> dict:
        """The task's sizes."""
        return dict(self.header["sizes"])

    @property
    def configs(self) -> list[dict]:
        """Every config of the table, in file order."""
        return [r[0] for r in self._rows.values()]

    def rows(self) -> list[tuple]:
        """``(config, gflops or None, error_kind or None)`` for every row, in file order."""
        return [r[:3] for r in self._rows.values()]

    def lookup(self, config: dict) -> tuple:
        """``(gflops, error_kind)`` of ``config``; KeyError when the table does not hold it."""
        _, gflops, kind, _ = self._rows[config_key(config)]
        return gflops, kind

    def __contains__(self, config: dict) -> bool:
        return config_key(config) in self._rows

    def median_s(self, config: dict) -> float | None:
        """The measured median time of ``config`` in seconds (None when invalid)."""
        _c, gflops, _, extra = self._rows[config_key(config)]
        if gflops is None:
            return None
        return extra.get("median_s") or self.header["flops"] / (gflops * 1e9)

    @property
    def valid_count(self) -> int:
        """Rows with a measured throughput."""
        return sum(r[1] is not None for r in self._rows.values())

    @property
    def best_gflops(self) -> float:
        """The highest throughput in the table (0.0 when nothing is valid)."""
        return max((r[1] for r in self._rows.values() if r[1] is not None), default=0.0)

    @property
    def best_config(self) -> dict | None:
        """The config with the highest throughput."""
        valid = [r for r in self._rows.values() if r[1] is not None]
        return max(valid, key=lambda r: r[1])[0] if valid else None

    def space(self, base: Space | None = None) -> Space:
        """The search space of replay: the knobs of the header, restricted to the configs in the table (random
        draws come from the table; every other config is ruled out by the constraint, so strategies never
        propose it). ``base`` supplies the function that applies a config to a schedule (for features); its
        knobs must be those of the header. DatasetError when they are not.

        Example::

            >>> ds = Dataset({"workload": "t", "sizes": {}, "threads": 1, "flops": 1.0, "knobs": {"a": [1, 2, 3]}},
            ...              [({"a": 2}, 1.0, None)])
            >>> sp = ds.space()
            >>> sp.size, sp.allowed_size, sp.allowed({"a": 1}), sp.allowed({"a": 2})
            (3, 1, False, True)
        """
        knobs = [Knob(name, tuple(values)) for name, values in self.knobs.items()]
        apply, name = _apply_nothing, self.workload
        if base is not None:
            have = {k.name: list(k.values) for k in base.knobs}
            if have != self.knobs:
                diff = sorted(set(have) ^ set(self.knobs)) or [k for k in have if have[k] != self.knobs.get(k)]
                raise DatasetError(f"{self._where()}: the dataset's search space differs from the workload's "
                                   f"space {base.name!r} (knob {diff[0]!r}); regenerate the dataset")
            knobs, apply, name = list(base.knobs), base._apply, base.name
        return TableSpace(name, knobs, apply, self.configs)

    def _where(self) -> str:
        return f"dataset {self.path}" if self.path else "dataset"

    # ------------------------------------------------------------------ writing and loading
    def save(self, path: str) -> None:
        """Write the dataset as CSV with its JSON header line (DatasetError naming the file if it cannot be)."""
        knobs = list(self.knobs)
        out = io.StringIO()
        header = {"format": "tensorlang-dataset", "format_version": FORMAT_VERSION, **self.header,
                  "rows": len(self), "valid": self.valid_count}
        out.write(MAGIC + json.dumps(header, sort_keys=False) + "\n")
        w = csv.writer(out, lineterminator="\n")
        w.writerow(knobs + list(_STATS))
        for config, gflops, kind, extra in self._rows.values():
            median = extra.get("median_s")
            w.writerow([_text(config[k]) for k in knobs]
                       + ["" if gflops is None else repr(float(gflops)),
                          "" if median is None else repr(float(median)), kind or "", extra.get("measurements", 1)])
        try:
            with open(path, "w", encoding="utf-8", newline="") as f:
                f.write(out.getvalue())
        except OSError as e:
            raise DatasetError(f"cannot write dataset {path}: {e.strerror or e}") from None
        self.path = path

    @staticmethod
    def load(path: str) -> Dataset:
        """Read a dataset file written by :meth:`save`; DatasetError naming the file, the line and the problem.

        Example::

            >>> Dataset.load("/no/such/file.csv")
            Traceback (most recent call last):
            ...
            tensorlang.tuner.records.dataset.DatasetError: cannot read dataset /no/such/file.csv: No such file ...
        """
        if os.path.exists(path) and not os.path.isfile(path):  # a folder, /dev/zero, a pipe: never ends or fails
            raise DatasetError(f"cannot read dataset {path}: not a regular file")
        try:
            with open(path, encoding="utf-8", newline="") as f:
                text = f.read()
        except OSError as e:
            raise DatasetError(f"cannot read dataset {path}: {e.strerror or e}") from None
        except UnicodeDecodeError as e:  # a binary file: a tuning database, a PNG, ...
            raise DatasetError(f"{path}: not a tensorlang dataset (not UTF-8 text: byte {e.object[e.start]:#04x} at "
                               f"offset {e.start})") from None
        lines = text.splitlines()
        if not lines or not lines[0].startswith(MAGIC):
            raise DatasetError(f"{path}:1: not a tensorlang dataset (the first line must start with {MAGIC.strip()!r})")
        try:
            header = json.loads(lines[0][len(MAGIC):])
        except json.JSONDecodeError as e:
            raise DatasetError(f"{path}:1: the JSON header is not valid JSON ({e.msg} at column "
                               f"{e.colno + len(MAGIC)})") from None
        except RecursionError:
            raise DatasetError(f"{path}:1: the JSON header is nested too deeply") from None
        if not isinstance(header, dict):
            raise DatasetError(f"{path}:1: the JSON header is a {type(header).__name__}, not an object")
        version = header.get("format_version")
        if version != FORMAT_VERSION:
            raise DatasetError(f"{path}:1: dataset format version {version!r}; this tensorlang reads version "
                               f"{FORMAT_VERSION}")
        check_header(header, f"{path}:1")
        knobs = header["knobs"]
        decode = {k: {_text(v): v for v in values} for k, values in knobs.items()}
        body = [(n, line) for n, line in enumerate(lines[1:], start=2) if line and not line.startswith("#")]
        reader = csv.reader([line for _, line in body])
        rows = []
        columns = None
        for (n, _), cells in zip(body, reader):
            if columns is None:
                columns = cells
                want = list(knobs) + list(_STATS)
                if columns != want:
                    raise DatasetError(f"{path}:{n}: columns {columns} do not match the header's knobs; "
                                       f"expected {want}")
                continue
            if len(cells) != len(columns):
                raise DatasetError(f"{path}:{n}: {len(cells)} cells, expected {len(columns)}")
            config = {}
            for k, cell in zip(knobs, cells):
                if cell not in decode[k]:
                    raise DatasetError(f"{path}:{n}: knob {k!r} has value {cell!r}, not one of {knobs[k]}")
                config[k] = decode[k][cell]
            g, m, kind, count = cells[len(knobs):]
            try:
                gflops = float(g) if g else None
                median = float(m) if m else None
                count = int(count)
            except ValueError:
                raise DatasetError(f"{path}:{n}: gflops, median_s and measurements must be numbers") from None
            if (gflops is None) == (not kind) or (gflops is not None and not (math.isfinite(gflops) and gflops > 0)):
                raise DatasetError(f"{path}:{n}: a row has either a positive gflops or an error_kind")
            if median is not None and not (math.isfinite(median) and median > 0):
                raise DatasetError(f"{path}:{n}: median_s must be a positive number of seconds, got {m!r}")
            if count < 1:
                raise DatasetError(f"{path}:{n}: measurements must be at least 1, got {count}")
            if kind and kind not in ERROR_KINDS:
                raise DatasetError(f"{path}:{n}: unknown error_kind {kind!r}; error kinds: {', '.join(ERROR_KINDS)}")
            rows.append((config, gflops, kind or None, {"median_s": median, "measurements": count}))
        if columns is None:
            raise DatasetError(f"{path}: the table has no column line")
        for key in ("format", "format_version", "rows", "valid"):
            header.pop(key, None)
        return Dataset(header, rows, path)


def check_header(header: dict, where: str = "dataset") -> None:
    """DatasetError, naming ``where`` (the file and line) and the field, unless the header's task fields have the
    types a dataset needs: ``workload`` a name, ``sizes`` an object of integers, ``threads`` an integer >= 1,
    ``flops`` a positive number, ``knobs`` an object of non-empty value lists, ``target`` an object if given.

    Example::

        >>> check_header({"workload": "matmul", "sizes": {"M": 8}, "threads": 1, "flops": 2.0, "knobs": {"a": [1]}})
        >>> check_header({"workload": "matmul", "sizes": [8], "threads": 1, "flops": 2.0, "knobs": {}}, "m.csv:1")
        Traceback (most recent call last):
        ...
        tensorlang.tuner.records.dataset.DatasetError: m.csv:1: the header's 'sizes' must be an object of ..., got [8]
    """
    for key in ("workload", "sizes", "threads", "flops", "knobs"):
        if key not in header:
            raise DatasetError(f"{where}: the header has no {key!r}")

    def integer(v) -> bool:
        return isinstance(v, int) and not isinstance(v, bool)

    problems = {
        "workload": not isinstance(header["workload"], str) and "a workload name",
        "sizes": not (isinstance(header["sizes"], dict) and all(integer(v) for v in header["sizes"].values()))
        and "an object of NAME: integer",
        "threads": not (integer(header["threads"]) and header["threads"] >= 1) and "an integer >= 1",
        "flops": not ((integer(header["flops"]) or isinstance(header["flops"], float))
                      and math.isfinite(header["flops"]) and header["flops"] > 0) and "a positive number",
        "knobs": not (isinstance(header["knobs"], dict)
                      and all(isinstance(v, list) and v for v in header["knobs"].values()))
        and "an object of KNOB: [its values, ...]",
        "target": header.get("target") is not None and not isinstance(header["target"], dict) and "an object",
    }
    for key, want in problems.items():
        if want:
            raise DatasetError(f"{where}: the header's {key!r} must be {want}, got {header[key]!r}")


def _apply_nothing(schedule, config) -> None:
    """The apply function of a space known only from a dataset's header: configs cannot be scheduled."""
    raise UsageError("this space comes from a dataset header alone; pass the workload's space to schedule it")


class TableSpace(Space):
    """A space whose allowed configs are a fixed list (a dataset's rows): random draws pick among them.

    Example::

        >>> import numpy as np
        >>> sp = TableSpace("t", [Knob("a", (1, 2, 3))], lambda s, c: None, [{"a": 3}])
        >>> sp.random(np.random.default_rng(0)), sp.allowed_size
        ({'a': 3}, 1)
    """

    def __init__(self, name: str, knobs, apply, members: list[dict]):
        keys = {config_key(c) for c in members}
        super().__init__(name, knobs, apply, constraint=lambda c: config_key(c) in keys,
                         constraint_doc="configs measured in the dataset")
        self.members = list(members)
        self._keys = [config_key(c) for c in self.members]
        self._allowed_size = len(self.members)
        spans = np.array([max(len(k.values) - 1, 1) for k in self.knobs], dtype=np.float64)
        self._positions = (np.array([self.encode(c) for c in self.members], dtype=np.float64).reshape(
            len(self.members), len(self.knobs)) / spans)
        self._spans = spans

    def allowed_configs(self):
        """The table's configs, in file order."""
        return (dict(c) for c in self.members)

    def random(self, rng):
        """A uniformly random config of the table."""
        return dict(self.members[int(rng.integers(len(self.members)))])

    def nearest(self, config: dict, exclude: set[str]) -> dict | None:
        """The config of the table closest to ``config`` and not in ``exclude`` (the sum over knobs of the
        distance between value positions, each knob scaled to [0, 1]; ties go to the earlier row), or None when
        every config of the table is excluded.

        Example::

            >>> sp = TableSpace("t", [Knob("a", (1, 2, 3, 4))], lambda s, c: None, [{"a": 1}, {"a": 4}])
            >>> sp.nearest({"a": 3}, set()), sp.nearest({"a": 3}, {'{"a":4}'})
            ({'a': 4}, {'a': 1})
        """
        if not self.members:
            return None
        d = np.abs(self._positions - self.encode(config) / self._spans).sum(axis=1)
        for i in np.argsort(d, kind="stable"):
            if self._keys[i] not in exclude:
                return dict(self.members[int(i)])
        return None


def from_records(records, task, note: str = "") -> Dataset:
    """The dataset of a task's database records: one row per distinct config. A config measured several times
    keeps the median of its valid records' median times (invalid if none of them is valid).

    Example::

        >>> from tensorlang.tuner.records.database import Record
        >>> from tensorlang.tuner.task import Task
        >>> t = Task.create("matmul", preset="small", threads=1)
        >>> c = t.space.config_at(0)
        >>> recs = [Record(t.key, "matmul", t.sizes, t.target, c, None, times=(0.002,), flops=t.flops),
        ...         Record(t.key, "matmul", t.sizes, t.target, c, None, times=(0.001,), flops=t.flops)]
        >>> ds = from_records(recs, t)
        >>> len(ds), ds.median_s(c)
        (1, 0.0015)
    """
    merged: dict[str, list] = {}
    misfits = []
    for rec in records:
        try:
            task.space.validate(dict(rec.config))
        except ValueError as e:
            misfits.append((rec, e))
            continue
        merged.setdefault(config_key(rec.config), []).append(rec)
    if misfits and not merged:
        rec, e = misfits[0]
        raise DatasetError(f"none of the {len(records)} records of {task.workload} fits the {task.space_used} search "
                           f"space: record {rec.id} (trial {rec.trial}): {e}; they were measured in another space "
                           f"(--space) or with another version of this one") from None
    rows = []
    for recs in merged.values():
        valid = [r.median_s for r in recs if r.ok]
        config = dict(recs[0].config)
        if valid:
            median = statistics.median(valid)
            rows.append((config, task.flops / median / 1e9, None, {"median_s": median, "measurements": len(recs)}))
        else:
            rows.append((config, None, recs[-1].error_kind or "runtime", {"measurements": len(recs)}))
    from tensorlang import __version__
    header = {"workload": task.workload, "sizes": dict(task.sizes), "threads": task.threads, "task_key": task.key,
              "flops": task.flops, "target": dict(task.target),
              "knobs": {k.name: list(k.values) for k in task.space.knobs},
              "tensorlang_version": __version__, "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
              "strategies": sorted({r.strategy for r in records}), "note": note, "space": task.space_used,
              "left_out": len(misfits)}
    if task.source:
        header["source"] = task.source
    return Dataset(header, rows)


def default_name(task) -> str:
    """A file name for a task's dataset: ``WORKLOAD_SIZES.csv``.

    Example::

        >>> from tensorlang.tuner.task import Task
        >>> default_name(Task.create("matmul", preset="small", threads=1))
        'matmul_M64_N48_K32.csv'
    """
    return f"{task.workload}_" + "_".join(f"{k}{v}" for k, v in task.sizes.items()) + ".csv"


def check_output_path(path: str) -> None:
    """DatasetError when ``path`` cannot be written (its folder is missing, or it names a folder).

    Example::

        >>> import os, tempfile
        >>> check_output_path(os.path.join(tempfile.gettempdir(), "matmul.csv"))
        >>> check_output_path("/no/such/dir/m.csv")
        Traceback (most recent call last):
        ...
        tensorlang.tuner.records.dataset.DatasetError: cannot write dataset /no/such/dir/m.csv: ... does not exist
        >>> check_output_path(tempfile.gettempdir())
        Traceback (most recent call last):
        ...
        tensorlang.tuner.records.dataset.DatasetError: cannot write dataset ...: it is a folder
    """
    if not path.strip():
        raise DatasetError("cannot write a dataset to an empty path; name a .csv file")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise DatasetError(f"cannot write dataset {path}: folder {folder} does not exist")
    if os.path.isdir(path):
        raise DatasetError(f"cannot write dataset {path}: it is a folder")
