#!/usr/bin/env bash
# Fresh clone of $1 (a branch of the checkout at /work/int2; change the path for yours): run_local.sh timed (no ccache), then
# the rest of the build as test.sh makes it, checking which of run_local's objects it recompiled.
set -u
BR=$1; OUT=$2
rm -rf /tmp/rl && git clone -q -b "$BR" /work/int2 /tmp/rl && cd /tmp/rl
export CCACHE_DISABLE=1
start=$(date +%s)
./scripts/run_local.sh > "$OUT.run_local.log" 2>&1; rc=$?
end=$(date +%s)
echo "run_local rc=$rc seconds=$((end-start))" | tee "$OUT.summary"
find build -name '*.o' -printf '%p %T@\n' | sort > /tmp/rl_before.txt
wc -l < /tmp/rl_before.txt | sed 's/^/objects after run_local: /' | tee -a "$OUT.summary"
start=$(date +%s)
./scripts/build.sh > "$OUT.build.log" 2>&1; rc=$?
end=$(date +%s)
echo "test.sh's build.sh after it: rc=$rc seconds=$((end-start))" | tee -a "$OUT.summary"
find build -name '*.o' -printf '%p %T@\n' | sort > /tmp/rl_after.txt
join /tmp/rl_before.txt /tmp/rl_after.txt | awk '$2 != $3' > /tmp/rl_changed.txt
echo "of run_local's objects, recompiled by test.sh's build: $(wc -l < /tmp/rl_changed.txt)" | tee -a "$OUT.summary"
head /tmp/rl_changed.txt >> "$OUT.summary"
echo "objects after both: $(wc -l < /tmp/rl_after.txt)" | tee -a "$OUT.summary"
