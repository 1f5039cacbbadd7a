"""Distributed tuning on a Dask cluster (tuner/measure/cluster.py, tuner/measure/cluster_worker.py): a real ``dask
scheduler`` and ``dask worker`` processes on loopback (tests/support/dask_cluster.py starts them, each worker pinned to
one core, and kills them at the end even when a test fails).

Covered: tuning through the cluster gives valid records (checked again against numpy here) measured only on the
workers of the task's target; two tasks of different targets measured at once, each on its own workers; a cluster
without a worker for the task's target (or its thread count) is a clear error naming both targets; bad addresses
and unreachable schedulers are clear errors in Python and on the command line; ``tune --cluster`` and live
``compare`` with ``TENSORLANG_CLUSTER``; the pipelined tuner loop (proposals while the last round measures) is
deterministic whatever order results arrive in. Faults (slow): kill -9 of a worker mid-run (the run finishes on
the other, no committed record lost), the scheduler killed mid-run (a clear message with the resume command, the
resume finishes, nothing lost), a frozen worker (SIGSTOP: its candidates go to the other), and a candidate that
kills every worker that runs it (recorded as ``lost``).
"""
from __future__ import annotations

import contextlib
import dataclasses
import itertools
import json
import os
import random
import shlex
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time
import types
import zlib

import numpy as np
import pytest

pytest.importorskip("distributed")

from dask_cluster import ROOT, LocalDask, free_port

import tensorlang as tl
from tensorlang.cli.main import main
from tensorlang.space import config_key
from tensorlang.tuner import features
from tensorlang.tuner.measure import cluster_worker as cw
from tensorlang.tuner.measure.cluster import (
    Cluster,
    ClusterError,
    ClusterOptions,
    DaskRunner,
    check_address,
    measure_many,
)
from tensorlang.tuner.measure.local import FAULTS_ENV, MeasureOptions, Result
from tensorlang.tuner.records.database import ERROR_KINDS, Database
from tensorlang.tuner.task import Task
from tensorlang.tuner.tuning import Tuner

OTHER = {"cpu": "other-cpu"}  # what the third worker of the shared cluster claims to be (cw.TARGET_ENV)


@pytest.fixture(autouse=True)
def no_faults(monkeypatch):
    monkeypatch.delenv(FAULTS_ENV, raising=False)
    monkeypatch.delenv(cw.FAULTS_ENV, raising=False)
    monkeypatch.delenv("TENSORLANG_CLUSTER", raising=False)


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    """Scheduler, workers ``a`` (core 0) and ``b`` (core 1) of this machine's target, and ``other`` (not pinned),
    which advertises another CPU."""
    with LocalDask(tmp_path_factory.mktemp("dask")) as dk:
        dk.start_scheduler()
        dk.start_worker("a", cpu=0)
        dk.start_worker("b", cpu=1)
        dk.start_worker("other", env={cw.TARGET_ENV: json.dumps(OTHER)})  # both cores: one to spare
        dk.wait_for_workers(3)
        dk.names = {name: dk.worker_address(name) for name in ("a", "b", "other")}
        yield dk


def matmul_task(threads: int = 1) -> Task:
    return Task.create("matmul", preset="small", threads=threads)


def check_records(records, task: Task, kinds=ERROR_KINDS) -> None:
    for r in records:
        assert r.task_key == task.key and r.sizes == task.sizes
        task.space.validate(r.config)
        if r.ok:
            assert r.times and all(t > 0 for t in r.times) and r.gflops > 0 and r.schedule
        else:
            assert r.error_kind in kinds and r.error, r


def integrity_ok(path) -> bool:
    conn = sqlite3.connect(path)
    try:
        return conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    finally:
        conn.close()


# ---------------------------------------------------------------------------------------------------------------
# tuning through the cluster


def test_tuning_on_the_cluster_gives_valid_records_from_the_matching_workers(shared, tmp_path):
    task = matmul_task()
    db = tmp_path / "c.db"
    with Cluster(shared.address, ClusterOptions(timeout=30)) as cluster:
        runner = DaskRunner(task, cluster, seed=4)
        assert {w.address for w in runner.workers} == {shared.names["a"], shared.names["b"]}
        assert runner.parallelism == 2
        summary = Tuner(task, 14, strategy="random", seed=4, db=db, runner=runner, retime_top=3).run()
    assert summary.trials_done == 14 and summary.valid == 14 and not summary.errors
    # both workers of the target measured, the worker of another target never did
    assert set(runner.measured_by) == {shared.names["a"], shared.names["b"]}
    assert sum(runner.measured_by.values()) == 14
    with Database(db) as d:
        records = d.records(task.key)
        retimed = d.retimed(task.key)
        best = d.best(task.key)
    assert len(records) == 14 and len({r.config_key() for r in records}) == 14
    assert [r.trial for r in records] == list(range(14))
    check_records(records, task)
    assert len(retimed) >= 2 and best.config_key() in retimed  # the re-timing ran on a worker
    # the best record's schedule computes the right thing here too
    rng = np.random.default_rng(0)
    A = rng.standard_normal((task.sizes["M"], task.sizes["K"])).astype(np.float32)
    B = rng.standard_normal((task.sizes["K"], task.sizes["N"])).astype(np.float32)
    C = tl.build(tl.Schedule.from_json(best.schedule, task.op))(A, B)
    np.testing.assert_allclose(C, A @ B, rtol=1e-4, atol=1e-4)


def test_two_tasks_are_measured_at_once_each_on_the_workers_of_its_target(shared):
    here = matmul_task()
    there = dataclasses.replace(here, target={**here.target, **OTHER})  # a task for the "other" CPU
    arrived = []
    with Cluster(shared.address) as cluster:
        ra, rb = DaskRunner(here, cluster), DaskRunner(there, cluster)
        assert [w.address for w in rb.workers] == [shared.names["other"]]
        configs = [here.space.config_at(i) for i in range(0, 1200, 100)]
        measure_many([(ra, configs[:2]), (rb, configs[:1])])  # every worker has started its processes
        got_a, got_b = measure_many([(ra, configs), (rb, configs[:6])],
                                    on_result=lambda runner, r: arrived.append((runner is ra, r.config)))
        # a tuner of several tasks takes each round as soon as it is in
        small, large = ra.submit(configs[:1]), rb.submit(configs[6:12])
        first = cluster.wait_any([small, large])
        assert first and all(b.complete for b in first) and not all(b.complete for b in (small, large))
        cluster.wait([small, large])
        assert all(r.ok for r in small.results + large.results)
    assert all(r.ok for r in got_a + got_b), [r.error for r in got_a + got_b if not r.ok]
    assert [r.config for r in got_a] == configs and [r.config for r in got_b] == configs[:6]
    assert set(ra.measured_by) <= {shared.names["a"], shared.names["b"]}
    assert set(rb.measured_by) == {shared.names["other"]}
    assert sorted(arrived, key=str) == sorted([(True, c) for c in configs] + [(False, c) for c in configs[:6]],
                                              key=str)
    # both tasks were in flight together: the results of one arrived before the last of the other
    firsts = [i for i, (a, _) in enumerate(arrived) if a]
    seconds = [i for i, (a, _) in enumerate(arrived) if not a]
    assert min(firsts) < max(seconds) and min(seconds) < max(firsts)


def test_features_are_computed_on_the_cores_that_measurements_leave_free(shared):
    here = matmul_task()
    there = dataclasses.replace(here, target={**here.target, **OTHER})
    configs = [here.space.config_at(i) for i in range(0, 4000, 97)]
    calls = []

    def local(c):
        calls.append(c)
        return features.of_config(here.space, here.op, here.sizes, c)

    with Cluster(shared.address) as cluster:
        pinned, spare = DaskRunner(here, cluster), DaskRunner(there, cluster)
        assert pinned.spare_cores == 0 and spare.spare_cores == (os.cpu_count() or 1) - 1
        got = spare.features(configs, local)
        assert not calls  # all of them computed by the worker
        expected = [features.of_config(here.space, here.op, here.sizes, c) for c in configs]
        assert all((g is None and e is None) or np.array_equal(g, e) for g, e in zip(got, expected))
        assert len({tuple(g) for g in got if g is not None}) > len(configs) // 2  # distinct configs, distinct vectors
        assert len(pinned.features(configs[:3], local)) == 3 and len(calls) == 3  # no core to spare: here


def test_no_worker_for_the_task_is_a_clear_error_naming_the_targets(shared):
    task = matmul_task()
    alien = dataclasses.replace(task, target={**task.target, "cpu": "a-cpu-nobody-has"})
    t0 = time.monotonic()
    with pytest.raises(ClusterError) as e:
        DaskRunner(alien, shared.address, cluster_options=ClusterOptions(timeout=30))
    assert time.monotonic() - t0 < 20  # every worker has said its target: no need to wait the whole timeout
    msg = str(e.value)
    assert "a-cpu-nobody-has" in msg and "can measure" in msg
    assert "other-cpu" in msg and task.target["cpu"] in msg  # the workers' targets
    for name in ("a", "b", "other"):
        assert shared.names[name] in msg
    with pytest.raises(ClusterError, match=r"it runs 2 threads, and its workers have at most 1 cores \(tune with "
                                           r"--threads 1\)"):
        DaskRunner(matmul_task(threads=2), shared.address)


def test_the_client_logs_no_traceback_at_info_while_the_tuner_holds_it_and_the_levels_come_back(shared):
    """distributed's client logs a lost scheduler at INFO with a traceback (``Batched Comm Closed``); the tuner's
    own error says it once, so while a Cluster holds its client those loggers stay at WARNING, and close() puts
    back what was there (the kill test below sees the whole path, but only when the timing makes the log)."""
    import logging
    names = ("distributed.batched", "distributed.core")
    before = {n: logging.getLogger(n).level for n in names}
    probe = logging.getLogger("distributed.batched")
    probe.setLevel(logging.INFO)  # as Dask's default logging config leaves it
    try:
        with Cluster(shared.address, ClusterOptions(timeout=10)):
            assert not any(logging.getLogger(n).isEnabledFor(logging.INFO) for n in names)
            assert logging.getLogger("distributed.batched").isEnabledFor(logging.WARNING)
        assert probe.level == logging.INFO
        probe.setLevel(logging.DEBUG)  # a user who asked for everything gets everything
        with Cluster(shared.address, ClusterOptions(timeout=10)):
            assert probe.isEnabledFor(logging.DEBUG)
        port = free_port()
        probe.setLevel(logging.INFO)
        with pytest.raises(ClusterError):
            Cluster(f"tcp://127.0.0.1:{port}", ClusterOptions(timeout=1))
        assert probe.level == logging.INFO  # restored when the connection fails too
    finally:
        for n, level in before.items():
            logging.getLogger(n).setLevel(level)


def test_bad_addresses_and_unreachable_schedulers_are_clear_errors(capsys, monkeypatch):
    assert check_address("127.0.0.1:8786") == "tcp://127.0.0.1:8786"
    for bad, why in (("", "empty"), ("tcp://host", "the port is missing"), ("udp://h:1", "protocol 'udp'"),
                     ("tcp://h:99999", "port '99999'"), ("tcp://h:80/x", "path")):
        with pytest.raises(ClusterError, match=why):
            check_address(bad)
    port = free_port()
    t0 = time.monotonic()
    with pytest.raises(ClusterError, match=rf"cannot reach the Dask scheduler at tcp://127.0.0.1:{port} within 1 s"):
        Cluster(f"tcp://127.0.0.1:{port}", ClusterOptions(timeout=1))
    assert time.monotonic() - t0 < 15
    with pytest.raises(ClusterError, match="needs Dask's TLS configuration"):
        Cluster(f"tls://127.0.0.1:{port}", ClusterOptions(timeout=1))
    with pytest.raises(ClusterError, match=r"a scheduler address .* or a distributed\.Client, got int"):
        Cluster(8786)

    def cli(*argv):
        rc = main(["tune", "matmul", "--preset", "small", "--trials", "2", "--threads", "1", *argv])
        return rc, capsys.readouterr().err

    rc, err = cli("--cluster", "http://x:1")
    assert rc == 2 and "tensorlang tune: error: --cluster: 'http://x:1' is not a scheduler address" in err
    assert "Traceback" not in err
    rc, err = cli("--cluster", f"127.0.0.1:{port}", "--cluster-timeout", "1")
    assert rc == 2 and f"--cluster: cannot reach the Dask scheduler at tcp://127.0.0.1:{port} within 1 s" in err
    rc, err = cli("--cluster", f"127.0.0.1:{port}", "--cluster-timeout", "0")
    assert rc == 2 and "--cluster-timeout: must be a positive number" in err
    monkeypatch.setenv("TENSORLANG_CLUSTER", "nowhere")
    rc, err = cli()
    assert rc == 2 and "TENSORLANG_CLUSTER: 'nowhere' is not a scheduler address" in err


def test_tune_and_live_compare_on_the_command_line(shared, tmp_path, capsys, monkeypatch):
    db = tmp_path / "cli.db"
    rc = main(["tune", "matmul", "--preset", "small", "--trials", "10", "--threads", "1", "--cluster", shared.address,
               "--db", str(db), "--json", "--no-baselines", "--strategy", "xgb-genetic"])
    out = capsys.readouterr()
    assert rc == 0, out.err
    report = json.loads(out.out)
    assert report["trials"] == 10 and report["valid_this_run"] == 10
    assert f"measuring on the Dask cluster at {shared.address}" in out.err
    with Database(db) as d:
        check_records(d.records(report["task_key"]), matmul_task())
    monkeypatch.setenv("TENSORLANG_CLUSTER", shared.address)  # the variable stands for --cluster
    rc = main(["compare", "matmul", "--preset", "small", "--strategies", "random,genetic", "--trials", "5",
               "--seeds", "1", "--threads", "1", "--json"])
    out = capsys.readouterr()
    assert rc == 0, out.err
    report = json.loads(out.out)
    assert f"measuring on the Dask cluster at {shared.address}" in out.err
    assert {k: len(v[0]["curve"]) for k, v in report["runs"].items()} == {"random": 5, "genetic": 5}
    assert all(v[0]["valid"] == 5 for v in report["runs"].values())
    rc = main(["compare", "matmul", "--strategies", "random", "--trials", "5", "--replay",
               str(ROOT / "datasets" / "matmul_512.csv"), "--cluster", shared.address])
    assert rc == 2 and "--cluster: only for live comparisons" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command to make certificates")
def test_tls_as_the_readme_shows_it(tmp_path):
    """A CA, one certificate for every process, scheduler and worker with --tls-*; the command line finds the
    client's side in Dask's configuration (here its environment variables), Python in a distributed.Security."""
    from distributed import Client
    from distributed.security import Security

    def ssl(*argv):
        subprocess.run(["openssl", *argv], cwd=tmp_path, check=True, capture_output=True)

    ssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-keyout", "ca.key", "-out", "ca.pem",
        "-subj", "/CN=tensorlang test CA")
    ssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "node.key", "-out", "node.csr", "-subj", "/CN=127.0.0.1")
    (tmp_path / "ext.cnf").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    ssl("x509", "-req", "-in", "node.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial", "-out",
        "node.pem", "-days", "2", "-extfile", "ext.cnf")
    ca, cert, key = (str(tmp_path / f) for f in ("ca.pem", "node.pem", "node.key"))
    security = Security(tls_ca_file=ca, tls_client_cert=cert, tls_client_key=key, require_encryption=True)
    with LocalDask(tmp_path / "dask", tls=["--tls-ca-file", ca, "--tls-cert", cert, "--tls-key", key],
                   security=security) as dk:
        address = dk.start_scheduler()
        assert address.startswith("tls://")
        dk.start_worker("a", cpu=0)
        dk.wait_for_workers(1)
        with pytest.raises(ClusterError, match="needs Dask's TLS configuration"):
            Cluster(address, ClusterOptions(timeout=5))  # no certificate here: a clear error
        env = dict(os.environ, PYTHONPATH=str(ROOT), DASK_DISTRIBUTED__COMM__TLS__CA_FILE=ca,
                   DASK_DISTRIBUTED__COMM__TLS__CLIENT__CERT=cert, DASK_DISTRIBUTED__COMM__TLS__CLIENT__KEY=key,
                   DASK_DISTRIBUTED__COMM__REQUIRE_ENCRYPTION="True")
        done = subprocess.run([sys.executable, "-m", "tensorlang.cli", "tune", "matmul", "--preset", "small",
                               "--trials", "4", "--threads", "1", "--cluster", address, "--db", str(tmp_path / "t.db"),
                               "--no-baselines", "--json"], cwd=ROOT, env=env, capture_output=True, timeout=300)
        assert done.returncode == 0, done.stderr.decode()[-2000:]
        assert json.loads(done.stdout)["valid_this_run"] == 4
        task = matmul_task()
        with Client(address, security=security, timeout=30, set_as_default=False) as client:
            with DaskRunner(task, client) as runner:
                [r] = runner.measure([task.space.config_at(0)])
        assert r.ok and r.times


# ---------------------------------------------------------------------------------------------------------------
# the pipelined tuner loop, without Dask


class _ScrambledRunner:
    """A runner that measures in the background: results (a made-up time per config) arrive in a random order,
    across every batch in flight."""

    parallelism = 3

    def __init__(self, seed: int):
        self.rng = random.Random(seed)
        self.pending: list = []
        self.submitted: list = []
        self.log: list = []
        self.phase_s = {"build": 0.0, "run": 0.0}
        self.best_s = None
        self.max_inflight = 0

    def submit(self, configs, on_result=None):
        batch = types.SimpleNamespace(results=[None] * len(configs), left=len(configs), on_result=on_result)
        self.pending += [(batch, i, c) for i, c in enumerate(configs)]
        self.submitted.append([config_key(c) for c in configs])
        self.log.append(("submit", len(self.submitted)))
        self.max_inflight = max(self.max_inflight, len(self.pending))
        return batch

    def wait(self, batch):
        self.log.append(("wait",))
        while batch.left:
            b, i, c = self.pending.pop(self.rng.randrange(len(self.pending)))
            r = Result(c, "{}", (1e-3 * (1 + zlib.crc32(config_key(c).encode()) % 97 / 97),))
            b.results[i] = r
            b.left -= 1
            b.on_result(r)
        return batch.results

    def close(self):
        pass


def test_the_pipelined_loop_proposes_while_measuring_and_is_deterministic(tmp_path):
    task = matmul_task()
    runs = []
    for seed in (1, 2):  # two different arrival orders
        runner = _ScrambledRunner(seed)
        db = tmp_path / f"p{seed}.db"
        summary = Tuner(task, 30, strategy="genetic", seed=0, db=db, runner=runner, batch=4).run()
        assert summary.trials_done == 30 and summary.valid == 30
        with Database(db) as d:
            records = d.records(task.key)
        assert [r.trial for r in records] == list(range(30)) and len({r.config_key() for r in records}) == 30
        # the second round went out before the first was waited for, and never more than two rounds flew
        assert runner.log[:3] == [("submit", 1), ("submit", 2), ("wait",)]
        assert runner.max_inflight <= 2 * 4
        assert [len(s) for s in runner.submitted][:2] == [4, 4]  # max(batch, parallelism) while the model is young
        runs.append(runner.submitted)
    assert runs[0] == runs[1]  # the same proposals whatever order the results arrived in


# ---------------------------------------------------------------------------------------------------------------
# faults


def _tune_in_thread(address, task, trials, db, options=None, **kw):
    """Run a Tuner on the cluster in a thread; returns (thread, box) with box["runner"], box["summary"] or
    box["error"]."""
    box: dict = {}

    def go():
        try:
            with Cluster(address, options or ClusterOptions(timeout=30)) as cluster:
                box["cluster"] = cluster
                box["runner"] = runner = DaskRunner(task, cluster, seed=1)
                box["summary"] = Tuner(task, trials, strategy="random", seed=1, db=db, runner=runner,
                                       retime_top=0, **kw).run()
        except BaseException as e:  # handed to the test
            box["error"] = e

    th = threading.Thread(target=go, daemon=True)
    th.start()
    return th, box


@contextlib.contextmanager
def _two_workers_a_freezable(tmp_path):
    """A local cluster of workers "a" (without a nanny, so that SIGSTOP freezes the worker itself) and "b"; yields
    the cluster and a's address."""
    with LocalDask(tmp_path / "dask") as dk:
        dk.start_scheduler()
        dk.start_worker("a", cpu=0, nanny=False)
        dk.start_worker("b", cpu=1)
        dk.wait_for_workers(2)
        yield dk, dk.worker_address("a")


def _count(db, task) -> int:
    if not os.path.exists(db):
        return 0
    with Database(db) as d:
        return d.count(task.key)


def test_a_crashing_or_hanging_candidate_is_its_record_and_the_worker_lives_on(tmp_path):
    task = matmul_task()
    configs = [task.space.config_at(i) for i in range(0, 500, 50)]
    faults = {config_key(configs[1]): "segfault", config_key(configs[3]): "hang", config_key(configs[5]): "wrong",
              config_key(configs[7]): "build_crash"}
    with LocalDask(tmp_path / "dask") as dk:
        dk.start_scheduler()
        dk.start_worker("a", cpu=0, env={FAULTS_ENV: json.dumps(faults)}, nanny=False)
        dk.wait_for_workers(1)
        a = dk.worker_address("a")
        with DaskRunner(task, dk.address, MeasureOptions(run_timeout=2, build_timeout=20)) as runner:
            results = runner.measure(configs)
        assert dk.procs["worker-a"].poll() is None  # the Dask worker itself never died
        assert dk.worker_address("a") == a
    kinds = {i: r.error_kind for i, r in enumerate(results) if not r.ok}
    assert kinds == {1: "crash", 3: "timeout", 5: "wrong", 7: "build"}, [r.error for r in results]
    assert "SIGSEGV" in results[1].error and "2 s" in results[3].error
    assert all(r.ok and len(r.times) >= 3 for i, r in enumerate(results) if i not in kinds)
    assert runner.measured_by[a] == len(configs)


@pytest.mark.slow
def test_kill_9_of_a_worker_mid_run_the_run_finishes_on_the_other(tmp_path):
    task = matmul_task()
    db = str(tmp_path / "k.db")
    with LocalDask(tmp_path / "dask") as dk:
        dk.start_scheduler()
        dk.start_worker("a", cpu=0)
        dk.start_worker("b", cpu=1)
        dk.wait_for_workers(2)
        a = dk.worker_address("a")
        th, box = _tune_in_thread(dk.address, task, 40, db)
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and th.is_alive():
            runner = box.get("runner")
            if runner is not None and runner.measured_by[a] >= 2 and _count(db, task) >= 6:
                break
            time.sleep(0.05)
        at_kill = box["runner"].measured_by[a]
        dk.kill("worker-a")  # the nanny and the worker, with its build and run processes
        with Database(db) as d:
            before = d.records(task.key)
        th.join(240)
        assert not th.is_alive(), "the run did not finish after a worker died"
    assert "error" not in box, box.get("error")
    summary, runner = box["summary"], box["runner"]
    assert summary.trials_done == 40 and summary.valid == 40 and not summary.errors
    assert runner.measured_by[a] <= at_kill + 1  # a result on its way when the worker died
    with Database(db) as d:
        after = d.records(task.key)
    assert integrity_ok(db)
    assert len(after) == 40 and after[: len(before)] == before  # no committed record lost or changed
    assert [r.trial for r in after] == list(range(40)) and len({r.config_key() for r in after}) == 40
    check_records(after, task)


@pytest.mark.slow
def test_a_frozen_worker_does_not_stall_the_run(tmp_path):
    task = matmul_task()
    db = str(tmp_path / "h.db")
    with _two_workers_a_freezable(tmp_path) as (dk, a):
        th, box = _tune_in_thread(dk.address, task, 30, db, ClusterOptions(timeout=30, margin=3))
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and th.is_alive():
            runner = box.get("runner")
            if runner is not None and runner.measured_by[a] >= 2 and _count(db, task) >= 5:
                break
            time.sleep(0.05)
        dk.kill("worker-a", signal.SIGSTOP)  # frozen: its connections stay open, it answers nothing
        t0 = time.monotonic()
        th.join(180)
        assert not th.is_alive(), "the run stalled on the frozen worker"
        took = time.monotonic() - t0
    assert "error" not in box, box.get("error")
    summary = box["summary"]
    assert summary.trials_done == 30 and summary.valid == 30, dict(summary.errors)
    assert a in box["cluster"]._suspects
    assert took < 120
    with Database(db) as d:
        check_records(d.records(task.key), task)


@pytest.mark.slow
def test_candidates_the_scheduler_gives_a_suspected_worker_are_taken_back(tmp_path):
    """A candidate sent while no worker was suspected may go to any worker, and the scheduler keeps counting a frozen
    worker's free slots: what it gives the frozen worker after the tuner suspected it (a run whose build was done
    elsewhere waits there for ever) is sent to the others at the watchdog's next look, long before a stall's nudge
    (the timeout of 240 s makes that 120 s)."""
    task = matmul_task()
    configs = [task.space.config_at(i) for i in range(0, 120, 20)]
    with _two_workers_a_freezable(tmp_path) as (dk, a):
        with Cluster(dk.address, ClusterOptions(timeout=240, margin=200)) as cluster:
            runner = DaskRunner(task, cluster, seed=1)
            dk.kill("worker-a", signal.SIGSTOP)  # frozen before anything was sent: the scheduler does not know
            batch = runner.submit(configs)
            deadline = time.monotonic() + 60
            given: tuple = ()
            while time.monotonic() < deadline and not given:
                given = cluster._sync(cluster.client.scheduler.processing, workers=[a]).get(a, ())
                time.sleep(0.1)
            assert given, "the scheduler gave the frozen worker nothing"
            cluster._suspects[a] = "frozen by the test"  # as the heartbeat check would, after the scheduler gave
            t0 = time.monotonic()
            cluster.wait([batch])
            took = time.monotonic() - t0
            assert all(r is not None and r.ok for r in batch.results), [r and r.error for r in batch.results]
            assert not cluster._sync(cluster.client.scheduler.processing, workers=[a]).get(a, ())
    assert took < 90, f"the candidates given to the frozen worker waited {took:.0f} s"


@pytest.mark.slow
def test_scheduler_killed_mid_run_says_so_keeps_every_record_and_resume_works(tmp_path):
    task = matmul_task()
    db = str(tmp_path / "s.db")
    trials = 40
    with LocalDask(tmp_path / "dask") as dk:
        port = free_port()
        dk.start_scheduler(port=port)
        dk.start_worker("a", cpu=0)
        dk.start_worker("b", cpu=1)
        dk.wait_for_workers(2)
        argv = ["tune", "matmul", "--preset", "small", "--trials", str(trials), "--threads", "1", "--strategy",
                "random", "--seed", "2", "--db", db, "--cluster", dk.address, "--cluster-timeout", "10",
                "--retime-top", "0", "--no-baselines"]
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
        proc = subprocess.Popen([sys.executable, "-m", "tensorlang.cli", *argv], cwd=ROOT, env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
        try:
            deadline = time.monotonic() + 180
            while time.monotonic() < deadline and proc.poll() is None and _count(db, task) < 5:
                time.sleep(0.05)
            assert proc.poll() is None, proc.communicate()
            dk.kill("scheduler")
            t0 = time.monotonic()
            _out, err = proc.communicate(timeout=60)
            took = time.monotonic() - t0
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
        err = err.decode()
        assert proc.returncode == 2 and took < 30, err
        lines = [line for line in err.splitlines() if line.startswith("tensorlang tune: error:")]
        assert len(lines) == 1 and "Traceback" not in err, err
        line = lines[0]
        assert f"lost the Dask scheduler at {dk.address}" in line and f"kept in {db}" in line
        resume = line.split("resume with: ", 1)[1]
        assert resume == "tensorlang " + shlex.join(argv)
        assert integrity_ok(db)
        with Database(db) as d:
            first = d.records(task.key)
        assert 5 <= len(first) < trials
        check_records(first, task)

        # Dask workers stop when their scheduler dies: start the scheduler again at the same address, and them
        dk.start_scheduler(port=port)
        dk.start_worker("a", cpu=0)
        dk.start_worker("b", cpu=1)
        dk.wait_for_workers(2)
        done = subprocess.run([sys.executable, "-m", "tensorlang.cli", *shlex.split(resume)[1:]], cwd=ROOT, env=env,
                              capture_output=True, timeout=300)
        assert done.returncode == 0, done.stderr.decode()[-3000:]
    with Database(db) as d:
        after = d.records(task.key)
    assert len(after) == trials and after[: len(first)] == first
    assert [r.trial for r in after] == list(range(trials)) and len({r.config_key() for r in after}) == trials
    check_records(after, task)


@pytest.mark.slow
def test_a_candidate_that_kills_its_workers_is_recorded_lost(tmp_path):
    task = matmul_task()
    space = task.space
    # the grid's first 8 proposals: the allowed canonical forms of the space's configs in order, each once
    canonical = {config_key(space.canonical(c)): space.canonical(c) for c in map(space.config_at, range(200))}
    order = list(itertools.islice((c for c in canonical.values() if space.allowed(c)), 8))
    killer = order[2]
    faults = {cw.FAULTS_ENV: json.dumps({config_key(killer): "kill_worker"})}
    db = str(tmp_path / "l.db")
    with LocalDask(tmp_path / "dask") as dk:
        dk.start_scheduler(env={"DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES": "1"})
        dk.start_worker("a", cpu=0, env=faults)  # with a nanny: each dies with the candidate and comes back
        dk.start_worker("b", cpu=1, env=faults)
        dk.wait_for_workers(2)
        with Cluster(dk.address, ClusterOptions(timeout=60)) as cluster:
            summary = Tuner(task, 8, strategy="grid", db=db, cluster=cluster, batch=2, retime_top=0).run()
    assert summary.trials_done == 8
    with Database(db) as d:
        records = {r.config_key(): r for r in d.records(task.key)}
    assert set(records) == {config_key(c) for c in order}
    lost = records[config_key(killer)]
    assert lost.error_kind == "lost" and "died" in lost.error and lost.times == ()
    # the others were measured, or lost with it when their worker died under them (Dask counts those deaths too)
    assert all(r.ok or r.error_kind == "lost" for r in records.values())
    assert sum(r.ok for r in records.values()) >= 5
    check_records(records.values(), task)


def test_the_test_scheduler_moves_to_another_port_when_its_pick_is_taken(tmp_path, monkeypatch):
    # CI once lost a test to a port taken between free_port() and the scheduler's bind (another test's process):
    # the helper tries another port then, and only for a port it picked itself
    import socket

    import dask_cluster
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        taken = busy.getsockname()[1]
        picks = iter([taken])
        monkeypatch.setattr(dask_cluster, "free_port", lambda: next(picks, None) or free_port())
        with LocalDask(tmp_path / "dask") as dk:
            address = dk.start_scheduler()
            assert address.endswith(f":{dk.port}") and dk.port != taken
        with LocalDask(tmp_path / "dask2") as dk, pytest.raises(RuntimeError, match="did not start"):
            dk.start_scheduler(port=taken)  # a port the test asked for is not changed behind its back
