#!/bin/bash
# The long random-mode fuzz in shards, on many cores: SCHED processes run schedule-fuzz shards of SN examples and
# PROGS processes random-program shards of PN examples, shard after shard until BUDGET seconds are used; every
# shard has a fresh seed and an empty hypothesis database. Logs, traces of failing shards and summary.txt (one line
# a shard: seed, examples, exit status, seconds) go to $OUT/logs.
# usage: OUT=/tmp/fuzz BUDGET=540 SCHED=13 PROGS=3 SN=1000 PN=4000 bash tests/support/fuzz_shards.sh
# (WHEELS=folder installs the wheels in it first, for a machine without the project's packages; PY=python to use)
set -u
PY=${PY:-python3}
cd "$(dirname "$0")/../.."
if [ -n "${WHEELS:-}" ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site "$WHEELS"/*.whl || exit 9
  export PYTHONPATH=/tmp/site
fi
export PYTHONDONTWRITEBYTECODE=1
# tensorlang.schedules and tensorlang.tuner exist only installed (package-dir mapping): install this checkout when
# this Python does not have it
if ! $PY -c "import tensorlang.schedules" 2>/dev/null; then
  $PY -m pip install -q --no-index --no-deps --no-build-isolation --target /tmp/tensorlang-site . || exit 9
  export PYTHONPATH=/tmp/tensorlang-site${PYTHONPATH:+:$PYTHONPATH}
fi
$PY -c "import llvmlite, numpy, hypothesis, pytest; print('llvmlite', llvmlite.__version__, 'numpy', numpy.__version__, 'hypothesis', hypothesis.__version__, 'pytest', pytest.__version__)"
lscpu | grep -E 'Model name|^CPU\(s\)'; which cc gcc clang
git rev-parse --short HEAD 2>/dev/null || echo "(no git)"
T0=$(date +%s); DEADLINE=$(( T0 + ${BUDGET:-520} ))
L=$OUT/logs; mkdir -p $L
shard() {  # kind examples id
  local kind=$1 n=$2 id=$3 est=60
  while [ $(( $(date +%s) + est * 12 / 10 )) -lt $DEADLINE ]; do
    local seed=$(python3 -c 'import random; print(random.SystemRandom().getrandbits(32))')
    local store=$(mktemp -d) start=$(date +%s) log=$L/$kind-$id-$seed.log
    if [ $kind = sched ]; then
      HYPOTHESIS_STORAGE_DIRECTORY=$store TENSORLANG_SCHEDULE_FUZZ_TRACE=$log.trace TENSORLANG_SCHEDULE_FUZZ=$n TENSORLANG_SCHEDULE_FUZZ_RANDOM=1 \
        timeout $(( DEADLINE - start )) $PY -m pytest -p no:cacheprovider -q tests/schedule/test_schedule_fuzz.py::test_workload_schedules \
        tests/schedule/test_schedule_fuzz.py::test_random_program_schedules --hypothesis-seed=$seed --hypothesis-show-statistics > $log 2>&1
    else
      HYPOTHESIS_STORAGE_DIRECTORY=$store TENSORLANG_FUZZ_TRACE=$log.trace TENSORLANG_FUZZ_EXAMPLES=$n TENSORLANG_FUZZ_RANDOM=1 \
        timeout $(( DEADLINE - start )) $PY -m pytest -p no:cacheprovider -q tests/dsl/test_random_programs.py::test_random_program \
        --hypothesis-seed=$seed --hypothesis-show-statistics > $log 2>&1
    fi
    local rc=$? end=$(date +%s)
    [ $rc = 0 ] && rm -f $log.trace
    est=$(( end - start ))
    echo "$kind $id seed=$seed examples=$n rc=$rc seconds=$est" | tee -a $L/summary.txt
  done
}
for i in $(seq 1 ${SCHED:-13}); do shard sched ${SN:-1000} $i & done
for i in $(seq 1 ${PROGS:-3}); do shard progs ${PN:-4000} $i & done
wait
echo "done after $(( $(date +%s) - T0 )) s"
awk '{split($5,a,"=");split($4,b,"="); k=$1; if (a[2]==0) ok[k]+=b[2]; else bad[k]++} END {for (k in ok) print k, "examples in passing shards:", ok[k]; for (k in bad) print k, "shards not passing:", bad[k]}' $L/summary.txt
grep -l -E "FAILED|Error" $L/*.log | head -20
cd $OUT && tar czf logs.tgz logs && rm -rf logs
