"""Disturbance-aware measurement (tuner/measure/disturbance.py): the figure of what other processes took from /proc/stat
counters, busy marks, rounds of an interleaved timing run again when the machine was busy, the notes of `bench`
and `tune`, and the figure carried from the run worker and the Dask worker. A fake /proc/stat stands in for the
machine wherever a test needs a busy or a quiet one: nothing here depends on how busy the test machine is, except
the one test that starts a competitor of its own.

Run: ``.venv/bin/pytest tests/tuner/test_disturbance.py -q``.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import numpy as np
import pytest

from tensorlang.tuner.measure import disturbance
from tensorlang.tuner.measure.disturbance import (
    CpuSample,
    Disturbance,
    Tally,
    between,
    busy,
    busy_note,
    others_cpus,
    parse_stat,
    run_rounds,
    slowdown,
)
from tensorlang.tuner.measure.local import FAULTS_ENV


@pytest.fixture(autouse=True)
def no_faults(monkeypatch):
    monkeypatch.delenv(FAULTS_ENV, raising=False)


class FakeStat:
    """A /proc/stat whose CPUs (those this process may run on) are idle between reads unless ``busy`` was set
    meanwhile: then other processes took every CPU. Idle accrues from the real clock, as on a machine."""

    def __init__(self):
        self.cpus = sorted(os.sched_getaffinity(0))
        self.idle = 1000.0 * len(self.cpus)
        self.last = time.perf_counter()
        self.busy = False
        self.reads = 0

    def __call__(self) -> str:
        now = time.perf_counter()
        if not self.busy:
            self.idle += len(self.cpus) * (now - self.last) * disturbance.TICKS_PER_S
        self.last, self.busy = now, False
        self.reads += 1
        per = self.idle / len(self.cpus)
        return (f"cpu  100 0 50 {int(self.idle)} 0 0 0 0 0 0\n"
                + "".join(f"cpu{c} 50 0 25 {int(per)} 0 0 0 0 0 0\n" for c in self.cpus) + "intr 1 2 3\n")


@pytest.fixture
def fake_stat(monkeypatch) -> FakeStat:
    fake = FakeStat()
    monkeypatch.setattr(disturbance, "read_stat", fake)
    return fake


# ---------------------------------------------------------------------------------------------------------------
# the figure


def test_others_cpus_of_synthetic_samples():
    hz = disturbance.TICKS_PER_S
    a = CpuSample(wall_s=100.0, own_s=10.0, idle_ticks=50 * hz, cpus=4)

    def after(wall, own, idle_s, cpus=4):
        return CpuSample(wall_s=100.0 + wall, own_s=10.0 + own, idle_ticks=50 * hz + int(idle_s * hz), cpus=cpus)
    assert others_cpus(a, after(1.0, 0.0, 4.0)) == 0.0          # all idle
    assert others_cpus(a, after(1.0, 2.0, 2.0)) == 0.0          # two CPUs ours, two idle
    assert others_cpus(a, after(2.0, 2.0, 3.0)) == 1.5          # 8 CPU-seconds: 2 ours, 3 idle, 3 others
    assert others_cpus(a, after(1.0, 0.0, 0.0)) == 4.0          # nothing idle, nothing ours: steal or others
    assert others_cpus(a, after(1.0, 1.0, 3.5)) == 0.0          # rounding past the CPUs counted: clamped at 0
    assert others_cpus(a, after(1.0, -1.0, 0.0)) == 4.0         # ... and at every CPU
    assert others_cpus(a, after(0.0, 0.0, 0.0)) is None         # no time passed
    assert others_cpus(a, after(1.0, 0.0, 1.0, cpus=2)) is None  # the CPUs counted changed (affinity)
    assert others_cpus(None, a) is None and others_cpus(a, None) is None
    d = between(a, after(0.5, 0.5, 0.5))                        # 2 CPU-seconds: 0.5 ours, 0.5 idle, 1 others
    assert d == Disturbance(2.0, 4, 0.5, 2 / (hz * 0.5))
    assert between(a, after(0.01, 0.0, 0.0)) is None             # too short for any figure within 0.5 CPU


def test_parse_stat_counts_idle_and_iowait_of_the_cpus_this_process_may_use():
    text = ("cpu  10 1 5 300 20 0 0 7 0 0\n"
            "cpu0 5 1 2 100 10 0 0 3 0 0\n"
            "cpu1 5 0 3 200 10 0 0 4 0 0\n"
            "intr 1\nctxt 2\n")
    assert parse_stat(text) == (320, 2, 1) and parse_stat(text, {0, 1, 2}) == (320, 2, 1)
    assert parse_stat(text, {1}) == (210, 1, 1)
    assert parse_stat("cpu  10 0 5 300\ncpu0 10 0 5 300\n") == (300, 1, 1)  # an old kernel: no iowait column
    for bad in ("", "intr 1\n", "cpu  x y z\ncpu0 1 2 3 4\n", "cpu  1 2\ncpu0 1 2\n", "cpu  1 2 3 4\n"):
        assert parse_stat(bad) is None, bad


def test_busy_and_the_slowdown_bound():
    assert not busy(0.05, threads=2, cpus=2)            # an idle guest's background
    assert busy(0.5, threads=2, cpus=2)
    assert not busy(1.0, threads=2, cpus=4)             # the others fit on the CPUs our threads leave free
    assert busy(2.5, threads=2, cpus=4)
    assert not busy(0.5, threads=2, cpus=2, uncertainty=0.5)  # within what the counters can tell
    assert slowdown(0.5, threads=2, cpus=2) == pytest.approx(2 / 1.5)
    assert slowdown(3.0, threads=1, cpus=4) == 1.0
    assert slowdown(1.9, threads=2, cpus=2) == 10.0 and slowdown(2.0, threads=2, cpus=2) == 10.0


def test_a_busy_interval_read_from_a_fake_proc_stat_marks_the_measurement_busy(fake_stat):
    threads = len(fake_stat.cpus)
    tally = Tally(threads)
    with tally.watch() as quiet:
        time.sleep(0.1)
    with tally.watch() as disturbed:
        time.sleep(0.1)
        fake_stat.busy = True
    assert quiet.disturbance.others_cpus < 0.3 and not quiet.disturbance.busy(threads)
    assert disturbed.disturbance.others_cpus > len(fake_stat.cpus) - 0.3 and disturbed.disturbance.busy(threads)
    assert (tally.measured, tally.busy) == (2, 1)
    figures = tally.to_json()
    assert figures["busy_fraction"] == 0.5 and figures["others_cpus"] == disturbed.disturbance.others_cpus
    assert tally.note().startswith("the machine was busy during 50% of the measurements (other processes used ")


def test_without_proc_stat_every_figure_is_unknown_and_nothing_fails(monkeypatch):
    monkeypatch.setattr(disturbance, "read_stat", lambda: None)
    tally = Tally(1)
    with tally.watch() as w:
        time.sleep(0.05)
    assert disturbance.sample() is None and w.disturbance is None
    assert tally.measured == 0 and tally.note() is None and tally.to_json()["busy_fraction"] == 0.0
    monkeypatch.setattr(disturbance, "read_stat", lambda: "garbage\n")
    assert disturbance.sample() is None


def test_a_helper_process_cpu_time_counts_as_ours(fake_stat):
    """A benchmark's library worker is part of the measurement, not another process: its CPU time counts as
    ours, and a helper that is gone leaves the figure unknown."""
    child = subprocess.Popen([sys.executable, "-c", "import time\nt = time.process_time()\n"
                              "while time.process_time() - t < 0.4: pass"])
    try:
        time.sleep(0.05)
        before = disturbance.sample([child.pid])
        time.sleep(0.2)
        after = disturbance.sample([child.pid])
    finally:
        child.wait(10)
    assert after.own_s - before.own_s > 0.03  # the child spun meanwhile
    assert disturbance.sample([child.pid]) is None


def test_run_rounds_repeats_busy_rounds_up_to_the_limit():
    ran = []
    assert run_rounds(3, lambda k: ran.append(k) or k == 1) == [0, 2, 3] and ran == [0, 1, 2, 3]
    ran.clear()
    assert run_rounds(3, lambda k: ran.append(k) or None) == [0, 1, 2] and ran == [0, 1, 2]  # unknown: quiet
    assert run_rounds(2, lambda k: True, extra=3) == [0, 1, 2, 3, 4]                        # never quiet: all
    assert run_rounds(2, lambda k: k < 4, extra=3) == [4]                                   # the one quiet round


# ---------------------------------------------------------------------------------------------------------------
# bench


class Row:
    """A bench row whose bursts sleep; its first burst is slow and, with ``disturb``, makes the machine busy."""

    def __init__(self, name, fake: FakeStat, order: list, disturb: bool = False):
        self.name, self.fake, self.order, self.disturb = name, fake, order, disturb
        self.bursts = 0

    def burst(self, runs, min_time):
        self.order.append(self.name)
        self.bursts += 1
        time.sleep(0.05)  # long enough for a figure: /proc/stat counts in ticks of 0.01 s
        if self.disturb and self.bursts == 1:
            self.fake.busy = True
            return [9e-3] * runs
        return [1e-3] * runs


def test_time_interleaved_runs_a_busy_round_again_and_rests_on_the_quiet_ones(fake_stat):
    from tensorlang.tuner.bench import time_interleaved
    order: list = []
    tally = Tally(len(fake_stat.cpus))
    logged: list = []
    rows = [Row("a", fake_stat, order, disturb=True), Row("b", fake_stat, order)]
    out = time_interleaved(rows, rounds=3, min_runs=6, min_time=0.0, log=logged.append, tally=tally)
    assert order == ["a", "b"] * 4  # the busy round 1, then three quiet ones: the rows stay interleaved
    assert [r["median_s"] for r in out] == [1e-3, 1e-3] and [r["runs"] for r in out] == [6, 6]
    assert all(r["spread"] == [0.0, 0.0] and r["busy_rounds"] == 1 and r["others_cpus"] < 0.3 for r in out)
    assert (tally.measured, tally.busy) == (4, 1)
    assert "the machine was busy" in logged[0] and "busy" not in "".join(logged[1:])


def test_time_interleaved_stops_after_three_extra_rounds_of_a_busy_machine(fake_stat):
    from tensorlang.tuner.bench import time_interleaved

    class Busy(Row):
        def burst(self, runs, min_time):
            super().burst(runs, min_time)
            self.fake.busy = True
            return [2e-3] * runs
    order: list = []
    out = time_interleaved([Busy("a", fake_stat, order)], rounds=2, min_runs=2, min_time=0.0,
                           tally=Tally(len(fake_stat.cpus)))
    assert order == ["a"] * 5 and out[0]["runs"] == 5 and out[0]["busy_rounds"] == 5


def test_the_bench_table_says_when_the_machine_was_busy(fake_stat):
    from tensorlang.tuner.bench import format_table, time_interleaved

    def table(disturb: bool) -> list[str]:
        tally = Tally(len(fake_stat.cpus))
        rows = [Row("naive", fake_stat, [], disturb=disturb)]
        [row] = time_interleaved(rows, rounds=2, min_runs=2, min_time=0.0, tally=tally)
        report = {"workload": "w", "sizes": {"N": 8}, "threads": tally.threads, "contract": "c",
                  "results": [{"name": "naive", "gflops": 1.0, **row}], "disturbance": tally.to_json()}
        return format_table(report).splitlines()
    busy_table = table(True)
    assert busy_table[-2] == "timed as: c"
    assert busy_table[-1].startswith("note: the machine was busy during 33% of the measurements (other processes "
                                     "used ") and "figures may be off by up to 900%" in busy_table[-1]
    assert table(False)[-1] == "timed as: c"


def test_library_rows_name_their_worker_process_and_bench_reports_the_figures(fake_stat):
    """The numpy worker's pid comes with its first answer (its CPU time is the bench's own), and run_bench's
    report carries the rounds' figures."""
    from tensorlang import schedules
    from tensorlang.tuner.bench import run_bench
    w = schedules.get("softmax")
    report = run_bench(w, {"N": 8, "D": 40}, threads=1, min_runs=1, min_time=0.0, log=lambda *a: None, rounds=2,
                       libraries=("numpy",))
    figures = report["disturbance"]
    assert figures["threads"] == 1 and figures["busy"] == 0 and figures["measurements"] <= 2
    assert all(r["busy_rounds"] == 0 for r in report["results"])
    from tensorlang.tuner.bench import LibraryRow
    sizes = {"N": 8, "D": 40}
    row = LibraryRow("numpy", w, sizes, w.make_inputs(sizes, np.random.default_rng(0)), threads=1)
    try:
        assert row.pids == ()
        row.first()
        [pid] = row.pids
        assert pid != os.getpid() and disturbance.process_ticks(pid) is not None
    finally:
        row.close()


# ---------------------------------------------------------------------------------------------------------------
# tune


def test_the_tune_summary_says_when_the_machine_was_busy():
    import argparse

    from tensorlang.cli.tune import format_summary, summary_json
    from tensorlang.tuner.records.database import Database
    from tensorlang.tuner.task import Task
    from tensorlang.tuner.tuning import TuneSummary
    task = Task.create("matmul", preset="small", threads=2)
    s = TuneSummary(task, None, 0, 4, valid=4)
    args = argparse.Namespace(preset="small", size=None, db=None, plot=None)
    quiet = format_summary(s, summary_json(s, Database(":memory:")), args)
    assert "busy" not in quiet
    for others in (0.0, 0.0, 1.0, 1.0, 0.02):
        s.disturbance.add(Disturbance(others, 2, 0.1, 0.04))
    report = summary_json(s, Database(":memory:"))
    assert report["disturbance"] == {"threads": 2, "measurements": 5, "busy": 2, "busy_fraction": 0.4,
                                     "others_cpus": 1.0, "cpus": 2, "slowdown": 2.0}
    text = format_summary(s, report, args).splitlines()
    assert "  the machine was busy during 40% of the measurements (other processes used 1.0 CPUs on average " \
           "while they ran); figures may be off by up to 100%" in text
    assert json.loads(json.dumps(report))["disturbance"] == report["disturbance"]


def test_busy_note_rounds_a_small_share_up_to_one_percent():
    assert busy_note({"busy": 1, "busy_fraction": 0.001, "others_cpus": 0.5, "slowdown": 1.0}).startswith(
        "the machine was busy during 1% of the measurements")


def test_the_dask_worker_answers_the_figure_and_the_runner_reads_it(monkeypatch):
    """The Dask worker times with the same run worker: its answers (a run, a re-timing) carry the figure, and
    DaskRunner turns it back into the Result's disturbance."""
    pytest.importorskip("distributed")
    import base64
    import dataclasses

    from tensorlang.space import config_key
    from tensorlang.tuner.measure import cluster_worker as cw
    from tensorlang.tuner.measure.cluster import DaskRunner
    from tensorlang.tuner.measure.local import MeasureOptions
    from tensorlang.tuner.task import Task
    task = Task.create("matmul", preset="small", threads=1, space="hand")
    a, b, c = (task.space.config_at(i) for i in range(3))
    monkeypatch.setenv(FAULTS_ENV, json.dumps({config_key(a): "busy_first", config_key(b): "quiet",
                                               config_key(c): "busy_first"}))
    job = {"id": "1", "task": dataclasses.asdict(task), "seed": 0, "options": MeasureOptions().__dict__,
           "config": a}
    try:
        built = json.loads(cw.build(json.dumps(job)))
        assert base64.b64decode(built["object"])
        answer = json.loads(cw.run(json.dumps(job), json.dumps(built)))
        cpus = answer["disturbance"]["cpus"]
        assert answer["error_kind"] is None and answer["disturbance"]["others_cpus"] == cpus
        r = DaskRunner._one(None, answer)
        assert r.disturbance == Disturbance.from_json(answer["disturbance"]) and r.disturbance.busy(1)
        answers = json.loads(cw.retime(json.dumps({**job, "configs": [c, b], "rounds": 2})))
    finally:
        cw.close_all()
    # c's first round is busy, so a third round runs and the two quiet ones count
    assert [len(x["round_disturbances"]) for x in answers] == [3, 3]
    assert answers[0]["round_disturbances"][0]["others_cpus"] == cpus
    results = [DaskRunner._one(None, x) for x in answers]
    assert all(r.ok and r.disturbance.others_cpus == 0.0 for r in results)
    assert all(len(r.extra["round_disturbances"]) == 3 for r in results)


@pytest.mark.slow
def test_a_competitor_process_marks_the_measurement_busy():
    """A CPU-bound process started beside the run worker (allowed on every CPU) shows in the figure the run worker
    answers. Only the figure is checked, never a time."""
    if disturbance.sample() is None:
        pytest.skip("no /proc/stat here")
    from tensorlang.tuner.measure.local import LocalRunner
    from tensorlang.tuner.task import Task
    task = Task.create("matmul", preset="small", threads=1, space="hand")
    code = "import os\nos.sched_setaffinity(0, range(os.cpu_count()))\nwhile True: pass"
    competitor = subprocess.Popen([sys.executable, "-c", code])
    try:
        with LocalRunner(task, jobs=1) as runner:
            [r] = runner.retime([task.space.config_at(0)], rounds=1)  # 0.1 s at least: long enough
    finally:
        competitor.kill()
        competitor.wait(10)
    assert r.ok and r.disturbance is not None and r.disturbance.others_cpus > 0.5, r.disturbance
