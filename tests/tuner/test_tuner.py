"""The auto-tuner (tuner/): faults of candidates become records of their kind and tuning goes on, kill -9 of a
tuning run loses nothing and the next run resumes, strategies are deterministic, never repeat a config and respect
the space's constraint, the cost model guided search beats random search, the worker processes survive crashes
and hangs, the output check, and the ``tensorlang tune / best / show --best / bench --db / ops --spaces`` commands.

Every test uses its own database file under ``tmp_path`` (never the user's cache) and the small presets.
Run: ``.venv/bin/pytest tests/tuner/test_tuner.py -q``.
"""
from __future__ import annotations

import json
import math
import os
import pathlib
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
import zlib

import numpy as np
import pytest

import tensorlang as tl
from tensorlang import schedules
from tensorlang.space import Knob, Space, config_key
from tensorlang.tuner.measure.local import FAULTS_ENV, MeasureOptions, compare
from tensorlang.tuner.measure.worker import Worker, WorkerCrash, WorkerTimeout
from tensorlang.tuner.records.database import ERROR_KINDS, Database, Record
from tensorlang.tuner.search.strategies import STRATEGIES, Observation, make_strategy
from tensorlang.tuner.task import Task
from tensorlang.tuner.tuning import Tuner, TuneSummary, hand_start_configs

ROOT = pathlib.Path(__file__).resolve().parents[2]
SUPPORT = pathlib.Path(__file__).resolve().parents[1] / "support"  # worker_handlers.py


@pytest.fixture(autouse=True)
def no_faults(monkeypatch):
    """No test inherits fault injection from the environment it was started in."""
    monkeypatch.delenv(FAULTS_ENV, raising=False)


def matmul_task() -> Task:
    return Task.create("matmul", preset="small", threads=1, space="hand")


def check_records(records, task: Task) -> None:
    """Every record is well formed: a config of the task's space, a known error kind with a message, or times."""
    for r in records:
        assert r.task_key == task.key and r.workload == task.workload and r.sizes == task.sizes
        task.space.validate(r.config)
        assert task.space.allowed(r.config)
        if r.ok:
            assert r.times and all(t > 0 for t in r.times) and r.gflops > 0 and r.error is None
            assert r.schedule is not None
        else:
            assert r.error_kind in ERROR_KINDS and r.error


def integrity_ok(path) -> bool:
    conn = sqlite3.connect(path)
    try:
        return conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    finally:
        conn.close()


# ---------------------------------------------------------------------------------------------------------------
# faults of candidates


@pytest.mark.slow
def test_every_fault_becomes_a_record_of_its_kind_and_tuning_goes_on(tmp_path, monkeypatch):
    task = matmul_task()
    space = task.space
    trials = 11
    # grid proposes the allowed configs in the space's order
    order = [space.config_at(i) for i in range(space.size) if space.allowed(space.config_at(i))][:trials]
    faults = {1: "segfault", 2: "hang", 4: "wrong", 5: "build_crash", 7: "build_hang", 8: "raise"}
    keys = {config_key(order[i]): fault for i, fault in faults.items()}
    monkeypatch.setenv(FAULTS_ENV, json.dumps(keys))  # before the tuner starts its workers
    db_path = tmp_path / "faults.db"
    tuner = Tuner(task, trials, strategy="grid", db=db_path, jobs=1, batch=trials,
                  options=MeasureOptions(run_timeout=2, build_timeout=5))
    t0 = time.monotonic()
    summary = tuner.run()
    wall = time.monotonic() - t0
    assert not summary.interrupted and not summary.exhausted
    assert summary.trials_before == 0 and summary.trials_done == trials
    assert dict(summary.errors) == {"crash": 1, "timeout": 1, "wrong": 1, "build": 1, "build_timeout": 1,
                                    "runtime": 1}
    assert summary.valid == trials - len(faults)
    assert wall < 120  # the hang and the build hang were cut at their time limits

    with Database(db_path) as db:
        records = db.records(task.key)
    assert len(records) == trials
    check_records(records, task)
    assert sorted(r.trial for r in records) == list(range(trials))
    by_key = {r.config_key(): r for r in records}
    assert set(by_key) == {config_key(c) for c in order}  # every proposed config measured once

    def rec(i):
        return by_key[config_key(order[i])]

    assert rec(1).error_kind == "crash" and "SIGSEGV" in rec(1).error
    assert rec(2).error_kind == "timeout" and "2 s" in rec(2).error
    assert rec(4).error_kind == "wrong" and "wrong result" in rec(4).error
    assert rec(5).error_kind == "build" and "SIGABRT" in rec(5).error
    assert rec(7).error_kind == "build_timeout" and "5 s" in rec(7).error
    assert rec(8).error_kind == "runtime" and "injected failure" in rec(8).error
    for i in range(trials):
        if i not in faults:  # the configs after each crash or hang were measured by a restarted worker
            assert rec(i).ok and len(rec(i).times) >= 3, rec(i)
    for r in records:
        if r.error_kind in ("crash", "timeout", "wrong", "runtime"):
            assert r.schedule is not None and r.times == ()  # built, failed when it ran
    # the best record is a valid one, and the summary agrees with the database
    assert summary.best is not None and summary.best.ok
    assert summary.best.config_key() not in keys
    assert len(summary.curve) == trials and summary.curve == sorted(summary.curve)


# ---------------------------------------------------------------------------------------------------------------
# kill -9 of a tuning run, and resuming


_TUNE_SCRIPT = """
import sys
from tensorlang import tuner
tuner.tune("matmul", trials=int(sys.argv[2]), preset="small", strategy="random", seed=5, db=sys.argv[1], jobs=1,
     threads=1, progress=False, batch=8, space="hand")
"""


@pytest.mark.slow
def test_a_ctrl_c_that_something_swallowed_still_stops_the_tuner_at_the_next_round(tmp_path):
    # a KeyboardInterrupt raised inside a finalizer or a callback from C is only printed by Python; the tuner
    # remembers the Ctrl-C (tensorlang.tuner.interrupt) and stops before its next round
    task = matmul_task()
    swallowed = []

    def on_trial(summary):
        if swallowed:
            return
        try:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(1)
        except KeyboardInterrupt:
            swallowed.append(summary.trials_done)

    # Python's own handler, as a program started from a terminal has (a suite started with `pytest &` from a
    # non-interactive shell inherits SIGINT ignored; the tuner then leaves it so)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        summary = Tuner(task, 40, strategy="random", seed=5, db=tmp_path / "t.db", jobs=1, batch=4, retime_top=0,
                        on_trial=on_trial).run()
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # put back
    finally:
        signal.signal(signal.SIGINT, previous)
    assert swallowed == [1] and summary.interrupted
    assert summary.trials_done == 4  # the round in flight was finished and kept, no other started
    with Database(tmp_path / "t.db") as db:
        assert db.count(task.key) == 4


def test_kill_9_mid_run_keeps_every_record_and_the_next_run_resumes(tmp_path):
    task = matmul_task()
    path = tmp_path / "killed.db"
    trials = 30
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.Popen([sys.executable, "-c", textwrap.dedent(_TUNE_SCRIPT), str(path), str(trials)],
                            cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            start_new_session=True)  # its own process group: the workers die with it
    killed_at = None
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            if path.exists():
                with Database(path) as db:
                    n = db.count(task.key)
                if n >= 5:
                    killed_at = n
                    break
            time.sleep(0.05)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)
        err = proc.stderr.read().decode()
        proc.stderr.close()
    assert killed_at is not None, f"the tuning run ended or stalled before 5 records: {err}"
    assert proc.returncode == -signal.SIGKILL

    assert integrity_ok(path)
    with Database(path) as db:
        first = db.records(task.key)
    assert killed_at <= len(first) < trials, "the run was killed after it finished"
    check_records(first, task)
    assert [r.trial for r in first] == list(range(len(first)))

    summary = Tuner(task, trials, strategy="random", seed=5, db=path, jobs=1, batch=8, retime_top=0).run()
    assert summary.trials_before == len(first) and summary.trials_done == trials - len(first)
    assert not summary.interrupted and not summary.exhausted
    assert integrity_ok(path)
    with Database(path) as db:
        after = db.records(task.key)
    assert len(after) == trials
    assert after[: len(first)] == first  # the first run's records are unchanged
    check_records(after, task)
    assert [r.trial for r in after] == list(range(trials))  # trial numbers continue, none twice
    keys = [r.config_key() for r in after]
    assert len(set(keys)) == trials  # no config measured twice
    assert summary.best is not None and summary.best.median_s == min(r.median_s for r in after if r.ok)


def test_tuning_again_resumes_from_the_records(tmp_path):
    task = Task.create("conv2d", preset="small", threads=1)
    path = tmp_path / "resume.db"
    s1 = Tuner(task, 8, strategy="xgb-genetic", seed=1, db=path, jobs=2).run()
    assert (s1.trials_before, s1.trials_done) == (0, 8)
    with Database(path) as db:
        first = db.records(task.key)
    assert len(first) == 8

    tuner = Tuner(task, 12, strategy="xgb-genetic", seed=1, db=path, jobs=2)
    s2 = tuner.run()
    assert (s2.trials_before, s2.trials_done) == (8, 4)
    assert len(s2.curve) == 12 and s2.curve[:8] == s1.curve
    # warm start: the strategy knew the earlier records, and proposed none of them again
    assert [o.config for o in tuner.strategy.history[:8]] == [r.config for r in first]
    with Database(path) as db:
        records = db.records(task.key)
    assert records[:8] == first and len(records) == 12
    assert len({r.config_key() for r in records}) == 12
    assert [r.trial for r in records] == list(range(12))
    check_records(records, task)
    # the best is the winner of the re-timing that ended the run (of its fastest configs)
    with Database(path) as db:
        retimed = db.retimed(task.key)
        assert s2.best.config_key() == db.best(task.key).config_key() == min(retimed, key=retimed.get)
    fastest = min((r for r in records if r.ok), key=lambda r: r.median_s)
    assert fastest.config_key() in retimed and set(retimed) == set(s2.retimed)

    # nothing left to do: no trial, no worker started
    s3 = Tuner(task, 12, strategy="xgb-genetic", seed=1, db=path, jobs=2).run()
    assert (s3.trials_before, s3.trials_done) == (12, 0) and s3.phase_s == {}
    with Database(path) as db:
        assert db.count(task.key) == 12


def test_tuning_starts_from_the_hand_config_once(tmp_path):
    task = Task.create("maxpool2d", preset="small", threads=1, space="hand")
    hand = schedules.get("maxpool2d").hand_config(task.sizes)
    assert hand_start_configs(task) == [hand]
    path = tmp_path / "hand.db"
    tuner = Tuner(task, 5, strategy="random", seed=2, db=path, jobs=1, start=hand_start_configs(task),
                  retime_top=1)
    tuner.run()
    with Database(path) as db:
        records = db.records(task.key)
        retimed = db.retimed(task.key)
    # the end's re-timing always includes the hand config, however its own short trial measured
    fastest = min((r for r in records if r.ok), key=lambda r: (r.median_s, r.id))
    assert [config_key(c) for c in tuner.retime_candidates()][-1] == config_key(hand)
    assert set(retimed) == ({fastest.config_key(), config_key(hand)} if fastest.config != hand else set())
    assert [r.trial for r in records] == list(range(5))
    assert records[0].strategy == "hand" and records[0].config == hand and records[0].ok
    assert {r.strategy for r in records[1:]} == {"random"}
    assert len({r.config_key() for r in records}) == 5      # observed like the strategy's own: never proposed again
    # resuming: the hand config has its record, so it is not measured again
    Tuner(task, 7, strategy="random", seed=2, db=path, jobs=1, start=hand_start_configs(task)).run()
    with Database(path) as db:
        records = db.records(task.key)
    assert [r.strategy for r in records].count("hand") == 1 and len(records) == 7
    # a start config outside the space is refused by name before anything runs
    with pytest.raises(ValueError, match=r"start: .*knob 'wi'"):
        Tuner(task, 3, db=tmp_path / "x.db", start=[dict(hand, wi=999)])
    with pytest.raises(ValueError, match=r"start: .*a config is a dict of knob values, got int"):
        Tuner(task, 3, db=tmp_path / "x.db", start=[5])
    # no hand config for this space at these sizes (matmul small: 48 columns), or none at all (layernorm)
    assert hand_start_configs(Task.create("matmul", preset="small", threads=1, space="hand")) == []
    assert hand_start_configs(Task.create("layernorm", preset="small", threads=1, space="hand")) == []
    # in a generated space the start is the auto-scheduler's zero-trial pick, then its variants
    generated = Task.create("layernorm", preset="small", threads=1, space="generated")
    starts = hand_start_configs(generated)
    assert starts[0] == generated.space.default() and starts == generated.space.variants()


def test_cli_tune_measures_the_hand_config_first_unless_told_not_to(tmp_path):
    task = Task.create("maxpool2d", preset="small")  # the CLI's default thread count
    for flag, first in ((("--space", "hand"), "hand"), (("--space", "hand", "--no-hand-start"), "xgb-genetic"),
                        (("--space", "generated"), "auto")):
        db = tmp_path / f"{first}.db"
        r = tensorlang("tune", "maxpool2d", "--preset", "small", "--trials", 2, "--db", db, "--no-baselines",
                       "--jobs", 1, "--retime-top", 0, *flag)
        assert r.returncode == 0, r.stderr
        assert ("the hand schedule's config is measured first" in r.stdout) == (first == "hand")
        assert ("the auto-scheduler's zero-trial pick is measured first" in r.stdout) == (first == "auto")
        with Database(db) as d:
            assert min(d.records(task.key), key=lambda rec: rec.trial).strategy == first
        if first == "hand":  # resuming: the start config has its record and is not measured again
            r = tensorlang("tune", "maxpool2d", "--preset", "small", "--trials", 3, "--db", db, "--no-baselines",
                           "--jobs", 1, "--retime-top", 0, *flag)
            assert "was measured in an earlier run" in r.stdout and "is measured first" not in r.stdout


def _record_closes(monkeypatch) -> list:
    closed, close = [], Database.close
    monkeypatch.setattr(Database, "close", lambda self: (closed.append(str(self.path)), close(self))[1])
    return closed


def test_cli_tune_interrupted_keeps_the_records_and_says_how_to_resume(tmp_path, monkeypatch, capsys):
    from tensorlang.cli.main import main
    from tensorlang.tuner.tuning import ProgressBar

    def ctrl_c(self, summary):
        raise KeyboardInterrupt
    monkeypatch.setattr(ProgressBar, "update", ctrl_c)  # Ctrl-C as the first trial is reported
    closed = _record_closes(monkeypatch)
    db = tmp_path / "my tuning.db"
    argv = ["tune", "maxpool2d", "--preset", "small", "--trials", "5", "--db", str(db), "--jobs", "1"]
    assert main(argv) == 130  # the exit status of a command stopped by Ctrl-C
    out = capsys.readouterr().out
    assert f"resume with: tensorlang tune maxpool2d --preset small --trials 5 --db '{db}'" in out  # not pytest's argv
    assert "timing the default schedule" not in out  # no baselines after an interrupt
    assert str(db) in closed
    with Database(db) as d:
        assert len(d.records(Task.create("maxpool2d", preset="small").key)) == 1


def test_cli_tune_closes_the_database_when_tuning_fails(tmp_path, monkeypatch):
    from tensorlang.cli.main import main

    def broken(self):
        raise RuntimeError("broken tuner")
    monkeypatch.setattr(Tuner, "run", broken)
    closed = _record_closes(monkeypatch)
    db = tmp_path / "t.db"
    with pytest.raises(RuntimeError, match="broken tuner"):
        main(["tune", "maxpool2d", "--preset", "small", "--trials", "2", "--db", str(db), "--jobs", "1"])
    assert closed == [str(db)]


# ---------------------------------------------------------------------------------------------------------------
# strategies


def toy_space(constraint=True) -> Space:
    knobs = [Knob("a", (1, 2, 4, 8)), Knob("b", (1, 2, 3, 4)), Knob("c", ("x", "y", "z")), Knob("d", (True, False)),
             Knob("e", (0, 1, 2, 3))]
    return Space("toy", knobs, lambda s, c: None,
                 constraint=(lambda c: c["a"] * c["b"] <= 16) if constraint else None)


def positions(space: Space):
    return lambda c: space.encode(c).astype(np.float64)


def make(name: str, space: Space, seed: int, **kw):
    if name == "xgb-genetic":
        kw.setdefault("featurize", positions(space))
        kw.setdefault("min_train", 4)
    return make_strategy(name, space, seed=seed, **kw)


def synthetic(config: dict) -> Observation:
    """A deterministic measurement: some configs invalid, the rest a throughput that depends on every knob."""
    h = zlib.crc32(config_key(config).encode())
    if h % 7 == 0:
        return Observation(config, None, "wrong")
    g = 10.0 * config["a"] / (1 + abs(config["b"] - 2)) + {"x": 1, "y": 5, "z": 2}[config["c"]] \
        + 3 * config.get("d", 0) + config.get("e", 0) + (h % 100) / 100
    return Observation(config, g)


def proposals(name: str, seed: int, rounds: int = 4, batch: int = 8, space: Space | None = None) -> list:
    st = make(name, space or toy_space(), seed)
    out = []
    for _ in range(rounds):
        got = st.propose(batch)
        out.append([config_key(c) for c in got])
        st.observe([synthetic(c) for c in got])
    return out


@pytest.mark.parametrize("name", list(STRATEGIES))
def test_same_seed_and_observations_give_the_same_proposals(name):
    a, b = proposals(name, seed=3), proposals(name, seed=3)
    assert a == b
    assert [len(x) for x in a] == [8, 8, 8, 8]
    if name != "grid":
        assert proposals(name, seed=4) != a, "a different seed should give different proposals"
    else:
        assert proposals(name, seed=4) == a  # grid ignores its seed


@pytest.mark.parametrize("name", list(STRATEGIES))
def test_no_repeats_nothing_ruled_out_and_fewer_when_the_space_runs_out(name):
    space = Space("tiny", [Knob("a", (1, 2, 3, 4)), Knob("b", (1, 2, 3)), Knob("c", ("x", "y"))],
                  lambda s, c: None, constraint=lambda c: c["a"] * c["b"] <= 6)
    allowed = {config_key(space.config_at(i)) for i in range(space.size) if space.allowed(space.config_at(i))}
    assert len(allowed) == space.allowed_size == 18
    st = make(name, space, seed=0)
    seen: list[str] = []
    sizes = []
    for _ in range(6):
        got = st.propose(5)
        sizes.append(len(got))
        for c in got:
            space.validate(c)
            assert space.allowed(c), f"{name} proposed {c}, which the constraint rules out"
        seen += [config_key(c) for c in got]
        st.observe([synthetic(c) for c in got])
    assert len(seen) == len(set(seen)), f"{name} proposed a config twice"
    assert set(seen) == allowed
    assert sizes == [5, 5, 5, 3, 0, 0]


@pytest.mark.parametrize("name", list(STRATEGIES))
def test_strategies_skip_configs_measured_before_they_existed(name):
    space = toy_space()
    earlier = [space.config_at(i) for i in range(0, space.size, 7) if space.allowed(space.config_at(i))][:20]
    st = make(name, space, seed=0)
    st.observe([synthetic(c) for c in earlier])  # a resumed run: records of an earlier one
    got = st.propose(16)
    assert len(got) == 16
    assert not {config_key(c) for c in got} & {config_key(c) for c in earlier}


def test_model_guided_search_beats_random_search_on_a_smooth_landscape():
    space = Space("hill", [Knob(f"k{i}", tuple(range(6))) for i in range(6)], lambda s, c: None)
    peak = np.array([4, 1, 3, 5, 2, 0])

    def gflops(c):
        return 100.0 / (1.0 + float(((space.encode(c) - peak) ** 2).sum()))

    def best_after_64(name, seed):
        st = make(name, space, seed, featurize=positions(space)) if name == "xgb-genetic" else make(name, space, seed)
        best = 0.0
        for _ in range(4):
            got = st.propose(16)
            assert len(got) == 16
            obs = [Observation(c, gflops(c)) for c in got]
            best = max([best] + [o.gflops for o in obs])
            st.observe(obs)
        return best

    seeds = (0, 1, 2)
    model = float(np.median([best_after_64("xgb-genetic", s) for s in seeds]))
    rand = float(np.median([best_after_64("random", s) for s in seeds]))
    # 64 of 46,656 configs: random search lands a few steps from the peak, the model-guided one next to it
    assert model > 1.5 * rand, (model, rand)
    assert model >= 100 / (1 + 3)  # within squared distance 3 of the peak


def test_tuner_passes_seed_and_strategy_options(tmp_path):
    task = matmul_task()
    runs = []
    for i in range(2):
        tuner = Tuner(task, 5, strategy="xgb-genetic", seed=7, db=tmp_path / f"d{i}.db", jobs=1,
                      strategy_options={"min_train": 4})
        assert tuner.strategy.min_train == 4
        tuner.run()
        with Database(tmp_path / f"d{i}.db") as db:
            runs.append([r.config_key() for r in sorted(db.records(task.key), key=lambda r: r.trial)])
    assert runs[0] == runs[1] and len(set(runs[0])) == 5  # one batch: proposed before any timing is known
    with pytest.raises(ValueError, match="has no option 'min_train'"):
        Tuner(task, 5, strategy="random", db=tmp_path / "x.db", strategy_options={"min_train": 4})
    with pytest.raises(ValueError, match="unknown strategy 'nope'"):
        Tuner(task, 5, strategy="nope", db=tmp_path / "x.db")
    with pytest.raises(ValueError, match="trials must be at least 1"):
        Tuner(task, 0, db=tmp_path / "x.db")
    for seed in (-1, 1.5, True):
        with pytest.raises(ValueError, match=f"seed must be an integer >= 0, got {seed!r}"):
            Tuner(task, 5, seed=seed, db=tmp_path / "x.db")
    with pytest.raises(ValueError, match="matmul: size M=0 must be >= 1"):
        Task.create("matmul", sizes={"M": 0})


def test_schedule_errors_become_records_and_tuning_goes_on(tmp_path):
    task = matmul_task()
    real = task.space

    def apply(s, cfg):
        if cfg["parallel"] == "none":
            raise tl.ScheduleError(f"toy refusal of {cfg['parallel']}")
        real._apply(s, cfg)

    task.__dict__["space"] = Space("matmul-refusing", real.knobs, apply, real.constraint)
    assert task.space.name == "matmul-refusing"
    path = tmp_path / "sched.db"
    # the model-guided strategy featurizes configs that cannot be scheduled too (their features are None)
    tuner = Tuner(task, 14, strategy="xgb-genetic", seed=0, db=path, jobs=1, batch=7,
                  strategy_options={"min_train": 3})
    summary = tuner.run()
    assert summary.trials_done == 14
    with Database(path) as db:
        records = db.records(task.key)
    assert len(records) == 14 and len({r.config_key() for r in records}) == 14
    assert sorted(r.trial for r in records) == list(range(14))
    for r in records:
        if r.config["parallel"] == "none":
            assert r.error_kind == "schedule" and "toy refusal" in r.error and r.schedule is None
        else:
            assert r.ok, r
    assert summary.errors["schedule"] == sum(r.config["parallel"] == "none" for r in records) > 0
    assert tuner.featurize({**records[0].config, "parallel": "none"}) is None
    assert tuner.featurize({**records[0].config, "parallel": "jo"}) is not None
    # the builder processes would rebuild the workload's own space, which schedules every config
    assert not tuner._builders_featurize


def test_candidates_far_from_the_best_stop_after_min_runs():
    from tensorlang.tuner.measure.local import LocalRunner
    task = matmul_task()
    cfg = task.space.config_at(0)
    with LocalRunner(task, jobs=1, options=MeasureOptions(min_runs=3, min_time=0.5, slow_factor=1e9)) as runner:
        [contender] = runner.measure([cfg])  # no best yet: timed for min_time
        assert len(contender.times) > 3
        runner.best_s = contender.median_s / 10  # the same kernel now looks 10x slower than the best
        [far] = runner.measure([cfg])
        assert len(far.times) == 3 and far.ok
        runner.options = MeasureOptions(min_runs=3, min_time=0.5, slow_factor=1e9, coarse_factor=math.inf)
        runner.best_s = contender.median_s / 10
        [precise] = runner.measure([cfg])
        assert len(precise.times) > 3



def test_a_slow_checked_run_alone_does_not_cut_a_candidate_short(monkeypatch):
    # the checked run is cold (workspace and threads touched first): a candidate whose checked run reads far
    # slower than the best but whose warm runs do not is timed in full; one slow when warm too gets one warm run
    from tensorlang.tuner.measure.local import LocalRunner
    task = matmul_task()
    cfg = task.space.config_at(0)
    monkeypatch.setenv(FAULTS_ENV, json.dumps({config_key(cfg): "cold"}))  # the checked run reads 1 s slower
    # no coarse cut: the same kernel of a few microseconds, timed again under the suite's load, can read slower
    # than its first median, which that cut rightly stops at min_runs
    options = MeasureOptions(min_runs=3, min_time=0.2, slow_factor=20.0, coarse_factor=math.inf)
    with LocalRunner(task, jobs=1, options=options) as runner:
        [first] = runner.measure([cfg])  # no best yet: timed for min_time, the cold run not among the times
        assert len(first.times) > 3 and max(first.times) < 0.5
        runner.best_s = first.median_s
        [again] = runner.measure([cfg])
        assert len(again.times) > 3 and again.ok and max(again.times) < 0.5
        runner.best_s = first.median_s / 1000  # now far slower than the best, warm too
        [far] = runner.measure([cfg])
        assert len(far.times) == 1 and far.ok and far.times[0] < 0.5
        # the coarse cut: 10x slower than the best even at its fastest, min_runs are enough to rank it
        runner.options = MeasureOptions(min_runs=3, min_time=0.2, slow_factor=math.inf, coarse_factor=1.5)
        runner.best_s = first.median_s / 10
        [coarse] = runner.measure([cfg])
        assert len(coarse.times) == 3 and coarse.ok and max(coarse.times) < 0.5
        # a checked run over a quarter of the run's time limit is not run again (a second could overrun it)
        runner.options = MeasureOptions(min_runs=3, min_time=0.2, slow_factor=20.0, run_timeout=2.0)
        [long] = runner.measure([cfg])
        assert len(long.times) == 1 and long.ok and long.times[0] >= 1.0


@pytest.mark.parametrize("bad, field", [
    ({"min_runs": 0}, "min_runs"), ({"min_runs": 5, "max_runs": 3}, "max_runs"), ({"run_timeout": 0}, "run_timeout"),
    ({"min_time": -1}, "min_time"), ({"coarse_factor": 0.9}, "coarse_factor"), ({"slow_factor": "x"}, "slow_factor"),
    ({"disturbance_time": -0.1}, "disturbance_time")])
def test_bad_measure_options_are_refused_by_name(bad, field):
    with pytest.raises(ValueError, match=f"MeasureOptions: .*{field}"):
        MeasureOptions(**bad)


def test_configs_with_the_same_llvm_ir_share_one_build_and_are_each_measured():
    # O.w.block 1 and 2 under the pick's register tile give the same loop nest (136 of the 500 configs one
    # `tune conv2d --trials 500` measured were such twins): the builders run LLVM once, from a cache in the
    # runner's folder
    from tensorlang.tuner.measure.local import LocalRunner
    task = Task.create("conv2d", preset="small", threads=1, space="generated")
    sp = task.space
    # (the search proposes only canonical configs, which map such twins to one; a start config or an older
    # record may still be a twin of a proposal)
    twins = [{**sp.canonical(sp.default()), "O.w.block": b} for b in (1, 2)]
    assert config_key(twins[0]) != config_key(twins[1]) and all(map(sp.allowed, twins))
    assert sp.canonical(twins[0]) == sp.canonical(twins[1])
    lowered = [sp.schedule(task.op, task.sizes, c).lower() for c in twins]
    assert lowered[0] == lowered[1]
    other = next(c for c in sp.variants() if sp.schedule(task.op, task.sizes, c).lower() != lowered[0])
    with LocalRunner(task, jobs=2) as runner:
        results = runner.measure(twins + [other])
        objects = os.listdir(os.path.join(runner._tmp.name, "objects"))
    assert all(r.ok and len(r.times) >= 1 for r in results)  # each measured, and checked against numpy
    assert len([f for f in objects if f.endswith(".o")]) == 2


def test_builders_featurize_exactly_like_the_tuner_and_survive_a_crash(monkeypatch):
    from tensorlang.tuner.measure.local import LocalRunner
    task = Task.create("conv2d", preset="small", threads=1, space="hand")
    rng = np.random.default_rng(3)
    configs = [task.space.random(rng) for _ in range(9)]
    tuner = Tuner(task, 1, db=":memory:")
    assert tuner._builders_featurize
    local = [tuner.featurize(c) for c in configs]
    monkeypatch.setenv(FAULTS_ENV, json.dumps({config_key(configs[4]): "features_crash"}))
    with LocalRunner(task, jobs=2) as runner:
        got = runner.features(configs, tuner.featurize)  # configs 0, 2, 4, ... go to the first builder
        assert runner._builders[0].restarts == 0 and not runner._builders[0].alive  # it died on config 4
        assert runner._builders[1].alive
        again = runner.features(configs[1::2], tuner.featurize)  # no crash in this share: the builders answer
        assert runner._builders[0].restarts == 1
    assert len(got) == len(configs)
    for g, want in zip(got + again, local + local[1::2]):
        assert g is not None and g.dtype == np.float64 and np.array_equal(g, want)


def test_xgb_genetic_never_scores_a_config_the_constraint_rules_out():
    sp = Space("toy", [Knob("a", tuple(range(12))), Knob("b", tuple(range(12)))], lambda s, c: None,
               constraint=lambda c: (c["a"] + c["b"]) % 3 != 0)
    scored = []

    def featurize(c):
        scored.append(c)
        return np.array([c["a"], c["b"]], dtype=float)

    st = make_strategy("xgb-genetic", sp, seed=0, featurize=featurize, min_train=4)
    for _ in range(4):
        out = st.propose(8)
        assert len(out) == 8 and all(sp.allowed(c) for c in out)
        st.observe([Observation(c, float(c["a"] * c["b"]) + 1.0) for c in out])
    assert len(scored) > 32 and all(sp.allowed(c) for c in scored)


def test_xgb_genetic_featurizes_each_batch_at_once_through_many():
    sp = Space("toy", [Knob("a", tuple(range(20))), Knob("b", tuple(range(20)))], lambda s, c: None)
    calls = []

    def featurize(c):
        raise AssertionError("one at a time")

    def many(cs):
        calls.append(len(cs))
        return [np.array([c["a"], c["b"]], dtype=float) for c in cs]

    featurize.many = many
    st = make_strategy("xgb-genetic", sp, seed=0, featurize=featurize, min_train=4)
    st.observe([Observation(c, float(c["a"] + c["b"]) + 1.0) for c in st.propose(8)])
    out = st.propose(8)
    assert len(out) == 8 and calls and max(calls) > 1
    assert all(config_key(c) not in {config_key(o.config) for o in st.history} for c in out)


# ---------------------------------------------------------------------------------------------------------------
# worker processes


@pytest.fixture
def handlers_on_path(monkeypatch):
    monkeypatch.syspath_prepend(str(SUPPORT))  # the worker gets the parent's sys.path as PYTHONPATH


def test_a_library_row_keeps_the_fastest_of_its_processes(handlers_on_path, tmp_path):
    """A library call's speed differs between processes of one machine; a row started in three keeps the fastest,
    times only it, and takes its outputs from it."""
    from tensorlang.tuner.bench import WorkerRow
    speeds = [3e-3, 1e-3, 2e-3]
    row = WorkerRow("lib", "worker_handlers:ranked", {"ranks": str(tmp_path), "speeds": speeds}, [], {},
                    processes=3)
    try:
        (out,) = row.first()
        assert out.tolist() == [1] and row.extra["probe_s"] == speeds and len(row.pids) == 1
        assert row.burst(4, 0.0) == [1e-3] * 4
        assert sorted(os.listdir(tmp_path)) == ["0", "1", "2"]
    finally:
        row.close()


def test_library_rows_take_their_process_count_from_the_environment(monkeypatch):
    """TENSORLANG_BENCH_PROCESSES sets how many processes a library row probes; the suite runs with 1, a user's
    default is 3, and a value out of range is an error that names the variable."""
    from tensorlang import schedules
    from tensorlang.errors import UsageError
    from tensorlang.tuner import bench
    assert os.environ["TENSORLANG_BENCH_PROCESSES"] == "1" and bench.library_processes() == 1
    monkeypatch.delenv("TENSORLANG_BENCH_PROCESSES")
    assert bench.library_processes() == bench.LIBRARY_PROCESSES == 3
    w = schedules.get("softmax")
    monkeypatch.setenv("TENSORLANG_BENCH_PROCESSES", "2")
    row = bench.library_row("numpy", w, {"N": 4, "D": 8}, w.make_inputs({"N": 4, "D": 8}, np.random.default_rng(0)),
                            threads=1)
    try:
        row.first()
        assert row.processes == 2 and len(row.extra["probe_s"]) == 2
    finally:
        row.close()
    for bad in ("0", "17", "three"):
        monkeypatch.setenv("TENSORLANG_BENCH_PROCESSES", bad)
        with pytest.raises(UsageError, match=f"TENSORLANG_BENCH_PROCESSES='{bad}'.*from 1 to 16"):
            bench.library_processes()


def test_worker_restarts_after_a_crash(handlers_on_path):
    w = Worker("worker_handlers:obedient", {"n": 1})
    try:
        first = w.call({"do": "echo", "x": [1, 2]}, timeout=60)
        assert first["request"] == {"do": "echo", "x": [1, 2]} and first["init"] == {"n": 1}
        assert w.call({"do": "echo"}, timeout=60)["pid"] == first["pid"]  # the same process serves every request
        for what, signame in (("segfault", "SIGSEGV"), ("abort", "SIGABRT")):
            with pytest.raises(WorkerCrash, match=signame):
                w.call({"do": what}, timeout=60)
            assert not w.alive
            again = w.call({"do": "echo"}, timeout=60)  # restarted on the next request
            assert again["pid"] != first["pid"] and w.alive
        assert w.restarts == 2
        with pytest.raises(WorkerCrash, match="exited with status 3"):
            w.call({"do": "exit"}, timeout=60)
        with pytest.raises(WorkerCrash, match="exited with status 1") as e:
            w.call({"do": "raise"}, timeout=60)
        assert "ValueError: the handler refused this request" in str(e.value)  # the tail of its stderr
        assert w.call({"do": "echo"}, timeout=60)["request"] == {"do": "echo"}
        assert w.restarts == 4
    finally:
        w.close()
    assert not w.alive


def test_worker_times_out_on_a_hang_and_is_killed(handlers_on_path):
    w = Worker("worker_handlers:obedient", {})
    try:
        pid = w.call({"do": "echo"}, timeout=60)["pid"]
        t0 = time.monotonic()
        with pytest.raises(WorkerTimeout, match=r"no answer within 1\.5 s"):
            w.call({"do": "hang"}, timeout=1.5)
        took = time.monotonic() - t0
        assert 1.5 <= took < 15
        assert not w.alive
        with pytest.raises(ProcessLookupError):  # killed and reaped
            os.kill(pid, 0)
        assert w.call({"do": "echo"}, timeout=60)["pid"] != pid
    finally:
        w.close()


def test_worker_that_cannot_start(handlers_on_path):
    w = Worker("worker_handlers:broken", {})
    with pytest.raises(WorkerCrash, match="failed to start") as e:
        w.call({}, timeout=10)
    assert "cannot make a handler" in str(e.value) and not w.alive
    w = Worker("worker_handlers:slow_start", {}, start_timeout=1.0)
    with pytest.raises(WorkerTimeout, match="did not start within 1 s"):
        w.ensure_started()
    assert not w.alive
    w.close()


# ---------------------------------------------------------------------------------------------------------------
# the output check


def test_compare():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    assert compare(a, a.copy()) is None
    # NaN only where a NaN is expected
    nan_expected = a.copy()
    nan_expected[1, 2] = np.nan
    assert compare(nan_expected.copy(), nan_expected) is None
    got = a.copy()
    got[2, 1] = np.nan
    msg = compare(got, a)
    assert msg is not None and msg.startswith("wrong result: 1 of 12 elements differ") and "(2, 1)" in msg
    assert compare(a, nan_expected) is not None  # a number where NaN is expected
    # reassociation error on a large-magnitude output passes, also in its small elements
    rng = np.random.default_rng(0)
    big = (rng.standard_normal(1000) * 1e6).astype(np.float32)
    big[0] = 1e-3
    off = big.astype(np.float64) + 1e-5 * 1e6 * rng.standard_normal(1000)
    assert compare(off.astype(np.float32), big) is None
    assert compare(big * np.float32(1.01), big) is not None  # a 1% error is not reassociation
    # infinities must match
    inf = np.array([np.inf, -np.inf, 1.0])
    assert compare(inf.copy(), inf) is None
    assert compare(np.array([np.inf, np.inf, 1.0]), inf) is not None  # +inf where -inf is expected
    assert compare(np.array([np.inf, 5.0, 1.0]), inf) is not None  # a number where -inf is expected
    # integers must be equal
    ints = np.array([1, 2, 3, 100000], dtype=np.int32)
    assert compare(ints.copy(), ints) is None
    msg = compare(np.array([1, 2, 4, 100000], dtype=np.int32), ints)
    assert msg == "wrong result: 1 of 4 elements differ, the largest by 1 at index (2,) (4 instead of 3)"
    assert "shape" in compare(np.zeros(3), np.zeros(4))
    # NaN or an infinity where the reference has a number never passes, one among right values or all
    assert compare(np.array([np.inf, 2.0]), np.array([1.0, 2.0])) is not None
    assert compare(np.array([-np.inf, 2.0]), np.array([1.0, 2.0])) is not None
    assert compare(np.full(4, np.nan, np.float32), np.ones(4, np.float32)).startswith("wrong result: 4 of 4")


@pytest.mark.parametrize("fault", ["nan", "one_nan"])
def test_a_candidate_whose_output_is_nan_is_a_wrong_record(fault, monkeypatch):
    """The tuner's check of a candidate (in the isolated runner) against the default schedule's output: an output
    of NaN, or one NaN among right values, is a "wrong" result, never a timing."""
    from tensorlang.tuner.measure.local import LocalRunner
    task = matmul_task()
    good, bad = task.space.config_at(0), task.space.config_at(1)
    monkeypatch.setenv(FAULTS_ENV, json.dumps({config_key(bad): fault}))
    with LocalRunner(task, jobs=1, options=MeasureOptions(min_time=0.0, min_runs=1)) as runner:
        ok, wrong = runner.measure([good, bad])
    assert ok.ok and ok.times
    assert wrong.error_kind == "wrong" and not wrong.times, wrong
    n = 1 if fault == "one_nan" else 3072
    assert wrong.error.startswith(f"output C: wrong result: {n} of 3072 elements differ"), wrong.error


def test_tuning_refuses_a_default_schedule_whose_output_is_nan(monkeypatch):
    """Candidates are checked against the default schedule's output: one that has NaN where numpy has numbers
    (a compiler bug) would let wrong candidates pass, so the runner refuses to start."""
    import tensorlang.tuner.measure.local
    real = tl.build

    def nan_build(*args, **kwargs):
        kernel = real(*args, **kwargs)

        def call(*arrays):
            out = kernel(*arrays)
            out.flat[5] = np.nan
            return out
        return call
    monkeypatch.setattr(tensorlang.tuner.measure.local.tl, "build", nan_build)
    with pytest.raises(tl.BuildError, match=r"matmul: the default schedule's result does not match the numpy "
                                            r"reference \(.*\): output 0: 1 NaN where the reference has a number"):
        tensorlang.tuner.measure.local.LocalRunner(matmul_task(), jobs=1)


@pytest.mark.parametrize("value,message", [
    ("{", "is not JSON"), ('{"k": "explode"}', "with faults from segfault"), ("[1]", "expected a JSON object")])
def test_bad_fault_hook_is_a_usage_error_naming_the_variable(value, monkeypatch, message):
    from tensorlang.tuner.measure.local import LocalRunner
    monkeypatch.setenv(FAULTS_ENV, value)
    with pytest.raises(tl.UsageError, match=f"TENSORLANG_TUNER_FAULTS=.*{message}"):
        LocalRunner(matmul_task(), jobs=1)


# ---------------------------------------------------------------------------------------------------------------
# the command line


def tensorlang(*args, timeout=300):
    env = {k: v for k, v in os.environ.items() if k != FAULTS_ENV}
    return subprocess.run([sys.executable, "-m", "tensorlang.cli", *map(str, args)], capture_output=True, text=True,
                          cwd=ROOT, timeout=timeout, env=env)


@pytest.mark.slow
def test_cli_tune_best_show_bench(tmp_path):
    db = tmp_path / "cli.db"
    plot = tmp_path / "curve.png"
    r = tensorlang("tune", "matmul", "--preset", "small", "--trials", 6, "--db", db, "--json", "--no-baselines",
                   "--jobs", 1, "--plot", plot)
    assert r.returncode == 0, r.stderr
    assert len(r.stdout.strip().splitlines()) == 1  # one JSON object on stdout; progress goes to stderr
    report = json.loads(r.stdout)
    from tensorlang.cli.tune import summary_json
    task = Task.create("matmul", preset="small")  # the CLI's default thread count
    with Database(":memory:") as mem:
        keys = set(summary_json(TuneSummary(task, None, 0, 0), mem))
    assert set(report) == keys
    assert report["workload"] == "matmul" and report["sizes"] == task.sizes and report["task_key"] == task.key
    assert report["trials"] == report["trials_this_run"] == 6 and report["db"] == str(db)
    assert report["valid_this_run"] + sum(report["errors_this_run"].values()) == 6
    assert report["best"]["gflops"] > 0 and report["interrupted"] is False
    assert report["baselines_gflops"] == {}
    assert plot.read_bytes().startswith(b"\x89PNG")
    with Database(db) as d:
        assert d.count(task.key) == 6

    # again with the same trials: nothing to do, nothing measured
    r = tensorlang("tune", "matmul", "--preset", "small", "--trials", 6, "--db", db, "--json", "--no-baselines")
    assert r.returncode == 0, r.stderr
    again = json.loads(r.stdout)
    assert again["trials"] == 6 and again["trials_this_run"] == 0 and again["best"] == report["best"]

    r = tensorlang("best", "matmul", "--preset", "small", "--db", db, "--json")
    assert r.returncode == 0, r.stderr
    best = json.loads(r.stdout)
    assert best["gflops"] > 0
    assert best["config"] == report["best"]["config"] and best["trial"] == report["best"]["trial"]
    lines = best["python"].splitlines()
    assert lines[0].startswith("s = tl.schedule(op, ") and lines[0].endswith(")")
    assert sorted(lines[0][len("s = tl.schedule(op, "):-1].split(", ")) == ["K=32", "M=64", "N=48"]
    assert all(line.startswith('s["C"].') for line in lines[1:]) and len(lines) > 5
    w = schedules.get("matmul")
    op = tl.op(w.source)
    ns = {"tl": tl, "op": op}
    exec(best["python"], ns)
    s = ns["s"]
    assert s.to_json() == tl.Schedule.from_json(best["schedule"], op).to_json()
    A, B = w.make_inputs(task.sizes, np.random.default_rng(0))
    np.testing.assert_allclose(tl.build(s)(A, B), A.astype(np.float64) @ B, rtol=1e-4, atol=1e-4)

    r = tensorlang("best", "matmul", "--preset", "small", "--db", db)
    assert r.returncode == 0 and best["python"] in r.stdout and "GFLOPS" in r.stdout

    r = tensorlang("show", "matmul", "--preset", "small", "--best", "--db", db)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("# schedule: tuned (the best tuned record of the tuning database)\ndef matmul(")
    assert "for " in r.stdout and "C_local" in r.stdout
    assert r.stdout.split("\n", 1)[1].strip() == s.lower().strip()

    r = tensorlang("bench", "matmul", "--preset", "small", "--db", db, "--json", "--repeat", 2, "--min-time", 0)
    assert r.returncode == 0, r.stderr
    rows = {row["name"]: row for row in json.loads(r.stdout)["results"]}
    assert "tuned" in rows and rows["tuned"]["gflops"] > 0 and rows["tuned"]["max_rel_error"] < 1e-4
    assert {"naive", "auto", "hand", "numpy"} <= set(rows)


def test_cli_ops_lists_every_search_space():
    r = tensorlang("ops", "--spaces", "--json")
    assert r.returncode == 0, r.stderr
    rows = {row["workload"]: row for row in json.loads(r.stdout)["workloads"]}
    assert list(rows) == list(schedules.WORKLOADS)
    with_space = [w for w in schedules.WORKLOADS.values() if w.space is not None]
    assert with_space, "no workload has a search space"
    for w in schedules.WORKLOADS.values():
        if w.space is None:
            assert "space" not in rows[w.name]
            continue
        sp = rows[w.name]["space"]
        assert sp["size"] > 0 and 0 < sp["allowed"] <= sp["size"], w.name
        assert sp["size"] == int(np.prod([len(v) for v in sp["knobs"].values()]))
        assert sp["knobs"] == {k.name: list(k.values) for k in w.space(w.sizes()).knobs}


@pytest.mark.parametrize("args,message", [
    (("--trials", "0"), "--trials: must be at least 1, got 0"),
    (("--strategy", "nope"), "--strategy: unknown strategy 'nope'; strategies: random, grid, genetic, bayesian, "
                             "xgb-genetic"),
    (("--cost-model", "nope"), "--cost-model: unknown cost model 'nope'; cost models: xgb"),
    (("--jobs", "0"), "--jobs: must be at least 1, got 0"),
    (("--timeout", "0"), "--timeout: must be a positive number of seconds, got 0"),
    (("--timeout", "nan"), "--timeout: must be a positive number of seconds, got nan"),
    (("--batch", "0"), "--batch: must be at least 1, got 0"),
    (("--sampler", "TPESampler"), "--sampler: only with --strategy bayesian, not 'xgb-genetic'"),
    (("--strategy", "bayesian", "--sampler", "Nope"), "--sampler: optuna has no sampler 'Nope'; samplers: "),
    (("--retime-top", "-1"), "--retime-top: must be at least 0, got -1"),
    (("--plot", "x.txt"), "--plot: the file must end in .png, got 'x.txt'"),
    (("--plot", "/nonexistent-folder/x.png"), "--plot: folder '/nonexistent-folder' does not exist"),
    (("--size", "M=64,,N=32,K=16"), "--size: an empty entry in 'M=64,,N=32,K=16'"),
    (("--size", "M=64,N=32,K=16,"), "--size: an empty entry in 'M=64,N=32,K=16,'"),
    (("--preset", "nope"), "--preset: matmul has no preset 'nope'; presets: 1024"),
    (("--size", "Q=3"), "--size: matmul has no size Q; sizes: M, N, K"),
    (("--size", "M=0"), "matmul: size M=0 must be >= 1"),
    (("--seed", "-5"), "argument --seed: must be an integer >= 0, got '-5'"),
    (("--seed", "4294967296"), "argument --seed: must be at most 2147483647 (2**31 - 1), got '4294967296'"),
    (("--threads", "5000"), "--threads: must be at most 1024 (the most threads the thread pool runs), got 5000"),
    (("--strategy", "bayesian", "--sampler", "GridSampler"), "--sampler: optuna's GridSampler needs more arguments "
                                                             "than a seed; samplers: "),
    (("--db", ""), "--db: the path is empty; name a tuning database file"),
    (("--db", "/"), "--db: cannot open tuning database /: it is a folder"),
])
def test_cli_tune_refuses_bad_flags(tmp_path, args, message):
    db = tmp_path / "flags.db"
    full = ["tune", "matmul", "--trials", "4", "--db", db, *args]
    if "--preset" not in args and "--size" not in args:
        full += ["--preset", "small"]
    r = tensorlang(*full)
    assert r.returncode == 2, r.stdout + r.stderr
    assert message in r.stderr
    assert r.stderr.startswith("tensorlang tune: error: ") or (  # argparse's own errors follow the usage
        r.stderr.startswith("usage: tensorlang tune") and "\ntensorlang tune: error: argument" in r.stderr)
    assert "Traceback" not in r.stderr
    assert r.stdout == ""
    assert not db.exists()  # refused before anything started


def test_cli_best_without_records_says_to_tune(tmp_path):
    r = tensorlang("best", "matmul", "--preset", "small", "--db", tmp_path / "empty.db")
    assert r.returncode == 2
    assert "no valid tuning record" in r.stderr and "run: tensorlang tune matmul --preset small" in r.stderr
    assert "Traceback" not in r.stderr
    r = tensorlang("show", "matmul", "--preset", "small", "--best", "--db", tmp_path / "empty.db")
    assert r.returncode == 2 and "run: tensorlang tune matmul --preset small" in r.stderr
    assert "Traceback" not in r.stderr


def test_cli_plot_to_a_folder_is_refused_before_tuning(tmp_path):
    (tmp_path / "curve.png").mkdir()
    r = tensorlang("tune", "matmul", "--preset", "small", "--trials", "2", "--db", tmp_path / "p.db", "--plot",
                   tmp_path / "curve.png")
    assert r.returncode == 2 and f"--plot: '{tmp_path / 'curve.png'}' is a folder, not a file" in r.stderr
    assert "Traceback" not in r.stderr and not (tmp_path / "p.db").exists()


def unwritable_folder(tmp_path) -> pathlib.Path:
    """A folder where this process cannot create a file: a read-only one, or (for root, who writes anywhere that
    permissions forbid) /sys, whose files only the kernel makes."""
    read_only = tmp_path / "read-only"
    read_only.mkdir()
    read_only.chmod(0o555)
    for folder in (read_only, pathlib.Path("/sys")):
        try:
            (folder / "probe.png").open("ab").close()
            (folder / "probe.png").unlink()
        except OSError:
            return folder
    pytest.skip("no folder here refuses a new file")


def test_cli_plot_to_a_folder_that_cannot_be_written_is_refused_before_tuning(tmp_path):
    plot = unwritable_folder(tmp_path) / "curve.png"
    r = tensorlang("tune", "matmul", "--preset", "small", "--trials", "2", "--db", tmp_path / "p.db", "--plot", plot)
    assert r.returncode == 2 and f"tensorlang tune: error: --plot: cannot write '{plot}': " in r.stderr, r.stderr
    assert "Traceback" not in r.stderr and not (tmp_path / "p.db").exists() and not plot.exists()


def test_cli_plot_that_fails_after_the_run_still_prints_the_summary(tmp_path, monkeypatch, capsys):
    from tensorlang.cli import tune as tune_cli
    from tensorlang.cli.main import main
    folder = tmp_path / "plots"
    folder.mkdir()
    plot_curve = tune_cli.plot_curve

    def after_the_folder_went(summary, path):  # the folder was removed while tuning ran
        folder.rmdir()
        plot_curve(summary, path)
    monkeypatch.setattr(tune_cli, "plot_curve", after_the_folder_went)
    code = main(["tune", "matmul", "--preset", "small", "--trials", "2", "--jobs", "1", "--no-baselines",
                 "--db", str(tmp_path / "p.db"), "--plot", str(folder / "curve.png")])
    out, err = capsys.readouterr()
    assert code == 0 and "tuned matmul: 2 trials (2 in this run)" in out and "next: tensorlang best" in out, out
    assert "plot:" not in out  # the summary does not claim a plot
    assert f"tensorlang tune: --plot: could not write '{folder / 'curve.png'}' (No such file or directory)" in err


def test_cli_a_damaged_database_names_the_file_and_the_record(tmp_path, monkeypatch, capsys):
    from tensorlang.cli.main import main
    task = matmul_task()
    path = tmp_path / "damaged.db"
    with Database(path) as db:
        db.add(Record(task.key, "matmul", task.sizes, task.target, task.space.config_at(0), "{}", (1e-3,),
                      flops=task.flops, trial=4))
    monkeypatch.setenv("TENSORLANG_NUM_THREADS", "1")
    for argv in (["best", "matmul", "--preset", "small"], ["show", "matmul", "--preset", "small", "--best"],
                 ["export", "matmul", "--preset", "small", "--best", "--format", "c", "-o", str(tmp_path / "out")]):
        assert main([*argv, "--db", str(path)]) == 2
        assert f"error: tuning database {path}: the schedule of record 1 (trial 4) cannot be rebuilt: from_json: " \
            in capsys.readouterr().err
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE records SET config = 'not json'")
    assert main(["best", "matmul", "--preset", "small", "--db", str(path)]) == 2
    assert f"tensorlang best: error: tuning database {path}: record 1 is damaged (" in capsys.readouterr().err
    monkeypatch.setenv("TENSORLANG_DB", str(tmp_path))
    assert main(["best", "matmul", "--preset", "small"]) == 2
    assert f"tensorlang best: error: TENSORLANG_DB: cannot open tuning database {tmp_path}: it is a folder" in \
        capsys.readouterr().err


def test_cli_bayesian_takes_any_optuna_sampler(tmp_path):
    db = tmp_path / "sampler.db"
    r = tensorlang("tune", "matmul", "--preset", "small", "--trials", "3", "--strategy", "bayesian", "--sampler",
                   "RandomSampler", "--db", db, "--jobs", "1", "--no-baselines", "--no-hand-start", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["trials"] == 3 and out["best"]["strategy"] == "bayesian"


# ---------------------------------------------------------------- re-timing the top candidates

def test_tuning_ends_by_retiming_the_top_configs_and_they_choose_the_best(tmp_path):
    task = matmul_task()
    db = Database(tmp_path / "rt.db")
    tuner = Tuner(task, 12, "random", db=db, jobs=1, retime_top=3, retime_rounds=2)
    summary = tuner.run()
    retimed = db.retimed(task.key)
    fastest = sorted(db.records(task.key, valid_only=True), key=lambda r: r.median_s)
    top3 = []
    for r in fastest:
        if r.config_key() not in top3:
            top3.append(r.config_key())
    assert set(retimed) == set(top3[:3]) and set(summary.retimed) == set(retimed)
    winner = min(retimed, key=retimed.get)
    assert summary.best.config_key() == winner == db.best(task.key).config_key()
    assert "retime" in summary.phase_s and db.count(task.key) == 12  # re-timing adds no trial
    # a resumed run re-times again, the last winner among the candidates even if it is not in the top 3
    db.add_retimes(task.key, [(fastest[-1].config, (1e-9,))])
    assert db.best(task.key).config_key() == fastest[-1].config_key()
    again = Tuner(task, 14, "random", db=db, jobs=1, retime_top=3, retime_rounds=1)
    assert fastest[-1].config_key() in {config_key(c) for c in again.retime_candidates()}
    again.run()
    assert len(db.retimed(task.key)) == 4
    db.close()


def test_retiming_leaves_out_records_of_another_version_of_the_space(tmp_path):
    task = matmul_task()
    old = dict(task.space.config_at(0), nr=999)  # a knob value today's space does not have
    db = Database(tmp_path / "old.db")
    db.add(Record(task.key, "matmul", task.sizes, task.target, old, None, (1e-9,), flops=task.flops))
    tuner = Tuner(task, 3, "random", db=db, jobs=1, retime_top=3, retime_rounds=1)
    summary = tuner.run()
    assert old not in tuner.retime_candidates() and len(summary.retimed) == 2
    db.close()


def test_retime_top_zero_keeps_the_fastest_single_measurement(tmp_path):
    task = matmul_task()
    db = Database(tmp_path / "rt0.db")
    summary = Tuner(task, 6, "random", db=db, jobs=1, retime_top=0).run()
    assert summary.retimed == {} and db.retimed(task.key) == {}
    assert summary.best.trial == min(db.records(task.key, valid_only=True), key=lambda r: (r.median_s, r.id)).trial
    db.close()


def test_best_follows_a_retiming_only_while_it_covers_every_record():
    db = Database(":memory:")
    mk = lambda v, t: Record("t", "w", {}, {}, {"v": v}, None, (t,))  # noqa: E731
    db.add(mk(1, 1.0))
    db.add(mk(2, 2.0))
    assert db.retimed("t") == {}
    db.add_retimes("t", [({"v": 1}, (3.0,)), ({"v": 2}, (2.5,))])
    assert db.best("t").config == {"v": 2}
    db.add(mk(3, 0.5))        # newer than the re-timing: the single measurements decide again
    assert db.best("t").config == {"v": 3} and db.retimed("t") == {}
    assert db.retimed("t", current_only=False) == {config_key({"v": 1}): 3.0, config_key({"v": 2}): 2.5}
    db.add(Record("t", "w", {}, {}, {"v": 4}, None, (), "crash", "SIGSEGV"))   # an invalid record changes nothing
    db.add_retimes("t", [({"v": 3}, (4.0,)), ({"v": 2}, (2.0,))])
    db.add(Record("t", "w", {}, {}, {"v": 5}, None, (), "wrong", "off by one"))
    assert db.best("t").config == {"v": 2}
    with pytest.raises(ValueError, match="positive times"):
        db.add_retimes("t", [({"v": 1}, ())])
    db.close()


def test_a_retiming_runs_a_busy_round_again_and_the_choice_rests_on_the_quiet_rounds(monkeypatch):
    """The run worker reads what other processes took around each measurement; a re-timing round during which
    the machine was busy is run again (the rows stay interleaved) and the times of the quiet rounds count."""
    from tensorlang.tuner.measure.disturbance import Disturbance
    from tensorlang.tuner.measure.local import LocalRunner
    task = matmul_task()
    a, b = task.space.config_at(0), task.space.config_at(1)
    monkeypatch.setenv(FAULTS_ENV, json.dumps({config_key(a): "busy_first", config_key(b): "quiet"}))
    with LocalRunner(task, jobs=1) as runner:
        ra, rb = runner.retime([a, b], rounds=2)
    assert ra.ok and rb.ok
    rounds_a = ra.extra["round_disturbances"]
    assert len(rounds_a) == 3 and len(rb.extra["round_disturbances"]) == 3  # one round more, for both
    assert rounds_a[0].busy(task.threads) and not any(d.busy(task.threads) for d in rounds_a[1:])
    # the figure of the rounds kept: only the quiet ones, each over 0.05 s at least
    assert ra.disturbance == Disturbance.combine(rounds_a[1:]) and ra.disturbance.others_cpus == 0.0
    assert all(d.seconds >= 0.05 for d in rounds_a)
    assert len(ra.times) >= 2 * 5 and len(rb.times) >= 2 * 5


def test_tuning_counts_the_busy_measurements_and_the_records_keep_their_figure(tmp_path, monkeypatch):
    from tensorlang.cli.tune import summary_json
    task = matmul_task()
    start = task.space.config_at(0)
    monkeypatch.setenv(FAULTS_ENV, json.dumps({config_key(start): "busy_first"}))
    db = Database(tmp_path / "busy.db")
    summary = Tuner(task, 3, "random", db=db, jobs=1, start=[start], retime_top=0).run()
    [rec] = [r for r in db.records(task.key) if r.config_key() == config_key(start)]
    assert rec.disturbance is not None and rec.disturbance.others_cpus == rec.disturbance.cpus
    assert rec.disturbance.busy(task.threads) and summary.disturbance.busy >= 1
    assert rec not in db.records(task.key, quiet_only=True)
    figures = summary_json(summary, db)["disturbance"]
    assert figures["busy"] == summary.disturbance.busy and figures["measurements"] >= 1
    db.close()


def test_the_baselines_are_timed_in_interleaved_rounds_as_bench_times_them(monkeypatch):
    """The summary's rows (naive nest, pick, hand schedule, best, numpy) are timed as `tensorlang bench` times
    them (the same function, so the same call path: public calls with outputs allocated), each once a round in
    bench's own rounds (5), so that a slow spell hits them alike: `tune` had timed its kernels as raw calls into
    preallocated buffers and numpy as an allocating call, and read 1.82x numpy where `bench` read 0.68x."""
    from tensorlang.tuner import bench
    from tensorlang.tuner.tuning import measure_baselines
    task = matmul_task()
    order: list[str] = []
    calls: list[dict] = []
    run_bench = bench.run_bench

    def recording_run_bench(*a, **k):
        calls.append(k)
        return run_bench(*a, **k)
    kernel_burst = bench.KernelRow.burst

    def recording_burst(self, runs, min_time):
        order.append(self.name)
        return kernel_burst(self, runs, min_time)

    class FakeNumpy:
        name = "numpy"

        def __init__(self, *a, **k):
            self.extra: dict = {}

        def first(self):
            A, B = task.workload_def.make_inputs(task.sizes, np.random.default_rng(0))
            return A @ B

        def burst(self, runs, min_time):
            order.append("numpy")
            return [1e-3] * runs

        def close(self):
            pass
    monkeypatch.setattr(bench, "run_bench", recording_run_bench)
    monkeypatch.setattr(bench.KernelRow, "burst", recording_burst)
    monkeypatch.setattr(bench, "library_row", FakeNumpy)
    # no round run again for a busy machine
    monkeypatch.setattr("tensorlang.tuner.measure.disturbance.read_stat", lambda: None)
    s_hand = tl.schedule(task.op, **task.sizes)
    schedules.get("matmul").hand_schedule(s_hand)
    best = Record(task.key, "matmul", task.sizes, {}, {}, s_hand.to_json(), times=(1e-3,), flops=task.flops)
    errors: dict = {}
    got = measure_baselines(task, best, errors=errors)
    assert errors == {} and set(got) == {"default", "auto", "hand", "tuned", "numpy"}
    assert got["numpy"] == pytest.approx(task.flops / 1e-3 / 1e9)
    assert order == ["naive", "auto", "hand", "tuned", "numpy"] * bench.BENCH_ROUNDS
    assert len(calls) == 1 and calls[0]["rounds"] == bench.BENCH_ROUNDS == 5 \
        and calls[0]["min_runs"] == bench.BENCH_RUNS and calls[0]["libraries"] == ("numpy",)


def test_a_baseline_that_fails_says_why(monkeypatch):
    """A baseline that cannot be timed (its warm-up call runs past the time limit, as the default matmul 1024's
    does) or whose output does not match the reference gets None and its reason, and the summary prints it
    instead of leaving the speed-up out silently."""
    from tensorlang.cli.tune import format_summary
    from tensorlang.tuner import bench
    from tensorlang.tuner.tuning import measure_baselines
    task = matmul_task()
    errors: dict = {}
    got = measure_baselines(task, None, numpy=False, errors=errors, timeout=0.0)
    assert got == {"default": None, "auto": None, "hand": None}
    assert all("more than the time limit of 0 s" in errors[k] for k in got), errors
    first = bench.KernelRow.first

    def wrong_pick(self):
        out = first(self)
        return out + 1.0 if self.name == "auto" else out
    monkeypatch.setattr(bench.KernelRow, "first", wrong_pick)
    errors = {}
    got = measure_baselines(task, None, numpy=False, errors=errors)
    assert got["auto"] is None and got["default"] and got["hand"], got
    assert set(errors) == {"auto"} and errors["auto"].startswith("wrong result: "), errors
    summary = TuneSummary(task, None, 0, 0, baselines=got, baseline_errors=errors)

    class Args:
        plot = preset = size = db = None
    text = format_summary(summary, {"trials": 0}, Args())
    assert "the auto-scheduler's pick could not be timed next to it (wrong result: " in text

def test_random_unseen_never_walks_a_huge_space():
    """Found tuning ResNet-18 with tune-model: where rejection sampling found too few allowed configs, the strategy
    walked the whole space for the rest, which never ends in a generated space of 10^9 and more configs. It now
    returns what sampling found (possibly nothing) at once."""
    from tensorlang.tuner.search.strategies import WALK_LIMIT, make_strategy

    class Huge:
        size = WALK_LIMIT * 1000
        knobs = ()

        def random(self, rng):
            return {"x": int(rng.integers(1 << 30))}

        def allowed(self, config):
            return config["x"] % 1000 == 0  # one in a thousand: rejection sampling finds a few

        def canonical(self, config):
            return config

        def allowed_configs(self):
            raise AssertionError("walked the whole space")

    strategy = make_strategy("random", Huge(), seed=0)
    got = strategy.random_unseen(50)
    assert 0 < len(got) < 50 and all(c["x"] % 1000 == 0 for c in got)


def test_tune_works_without_dask_and_cluster_says_what_to_install(tmp_path):
    """The README's main job installs tensorlang without the cluster extra: `tune` must not import Dask (a fresh
    clone's `tensorlang tune conv2d` failed with ModuleNotFoundError: distributed), and `--cluster` without it is a
    flag error that says what to install."""
    fake = tmp_path / "nodask" / "distributed"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ModuleNotFoundError(\"No module named 'distributed'\")\n")
    env = {k: v for k, v in os.environ.items() if k != FAULTS_ENV}
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path / "nodask"), str(ROOT)])
    run = lambda *a: subprocess.run([sys.executable, "-m", "tensorlang.cli", *map(str, a)], capture_output=True,  # noqa: E731
                                    text=True, cwd=ROOT, timeout=300, env=env)
    r = run("tune", "matmul", "--preset", "small", "--trials", 2, "--db", tmp_path / "t.db", "--no-baselines",
            "--jobs", 1, "--retime-top", 0)
    assert r.returncode == 0, r.stderr
    r = run("tune", "matmul", "--preset", "small", "--trials", 2, "--db", tmp_path / "t.db", "--no-baselines",
            "--cluster", "tcp://127.0.0.1:8786")
    assert r.returncode == 2
    assert "--cluster: tuning on a Dask cluster needs Dask's distributed" in r.stderr
    assert "pip install 'tensorlang[cluster]'" in r.stderr and "Traceback" not in r.stderr


def test_a_u8_program_is_measured_and_checked():
    """The runner fills each output with a poison value before a run; for a u8 output that value wraps into the
    type (numpy refuses -12345 there), and the candidates are measured and checked, not reported as crashes."""
    from tensorlang.tuner.measure.local import LocalRunner
    task = Task.from_source("def inc(A: u8[N]) -> B:\n    B[i] = A[i] + 1\n", {"N": 64}, threads=1)
    configs = [task.space.config_at(0), task.space.config_at(1)]
    with LocalRunner(task, jobs=1, options=MeasureOptions(min_time=0.0, min_runs=1)) as runner:
        results = runner.measure(configs)
    assert all(r.ok and r.times for r in results), [(r.error_kind, r.error) for r in results]
