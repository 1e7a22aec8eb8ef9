#!/usr/bin/env bash
# The flake hunt: runs test.sh's two test stages -- the ctest stage (every
# test of build/) and the TSan stage (the concurrency tests of build-tsan/),
# through NEREUS_TEST_STAGE, so with CI's own job counts and exclusions --
# RUNS times each beside BUSY busy loops (default 10 and 2), as a loaded
# 2-core machine would, and writes a summary of every run: pass or fail, the
# failed tests, the seconds, the load. Anyone can rerun it; it changes
# nothing but OUT.
#
#   tests/scripts/flake_hunt.sh [--runs=10] [--busy=2] [--stages=ctest,tsan] [--out=DIR]
#
# Needs the two builds test.sh makes (./scripts/test.sh once, or
# scripts/build.sh and NEREUS_BUILD_DIR=build-tsan scripts/build.sh
# -DNEREUS_SANITIZE=thread -DNEREUS_WITH_TRAINER=OFF). Each run's full ctest
# output is kept in OUT/<stage>-<run>.log; OUT/summary.txt and
# OUT/summary.json hold the counts (the committed summary lives in
# bench/results/flakes/). The convergence tests (label convergence) run in
# the ctest stage like every other: this is test.sh's stage as CI runs it.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$(pwd)
RUNS=10
BUSY=2
STAGES=ctest,tsan
OUT="$ROOT/build/flake_hunt"
for a in "$@"; do
  case "$a" in
    --runs=*) RUNS=${a#--runs=} ;;
    --busy=*) BUSY=${a#--busy=} ;;
    --stages=*) STAGES=${a#--stages=} ;;
    --out=*) OUT=${a#--out=} ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "flake_hunt.sh: unknown argument $a (see --help)" >&2; exit 2 ;;
  esac
done
mkdir -p "$OUT"
[[ -d build ]] || { echo "flake_hunt.sh: no build/ (run ./scripts/test.sh once)" >&2; exit 2; }
[[ ",$STAGES," != *,tsan,* || -d build-tsan ]] || { echo "flake_hunt.sh: no build-tsan/ (run ./scripts/test.sh once)" >&2; exit 2; }

LOOPS=()
stop_loops() {
  local p
  for p in "${LOOPS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${LOOPS[@]}"; do wait "$p" 2>/dev/null || true; done
  LOOPS=()
}
trap stop_loops EXIT
for ((i = 0; i < BUSY; ++i)); do
  ( while :; do :; done ) &
  LOOPS+=($!)
done

commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
: > "$OUT/runs.jsonl"
for stage in ${STAGES//,/ }; do
  for ((run = 1; run <= RUNS; ++run)); do
    log="$OUT/$stage-$run.log"
    start=$SECONDS
    load=$(cut -d' ' -f1 /proc/loadavg)
    rc=0
    case "$stage" in
      ctest|tsan) NEREUS_TEST_STAGE=$stage ./scripts/test.sh > "$log" 2>&1 || rc=$? ;;
      *) echo "flake_hunt.sh: unknown stage $stage" >&2; exit 2 ;;
    esac
    secs=$((SECONDS - start))
    failed=$(sed -n 's/^[[:space:]]*[0-9]* - \([A-Za-z0-9_]*\) (\(Failed\|Timeout\|SEGFAULT\|Subprocess aborted\|Exception\)).*/\1/p' "$log" |
             sort -u | tr '\n' ' ')
    # The test cases that failed (gtest's), and ThreadSanitizer's reports.
    cases=$(sed -n 's/^\[  FAILED  \] \([A-Za-z0-9_]*\.[A-Za-z0-9_/]*\) (.*/\1/p' "$log" | sort -u | tr '\n' ' ')
    races=$(grep -c '^WARNING: ThreadSanitizer' "$log" || true)
    python3 - "$stage" "$run" "$rc" "$secs" "$load" "$failed" "$commit" "$cases" "$races" >> "$OUT/runs.jsonl" <<'EOF'
import json, sys
stage, run, rc, secs, load, failed, commit, cases, races = sys.argv[1:10]
print(json.dumps({"stage": stage, "run": int(run), "exit": int(rc), "seconds": int(secs), "load1_at_start": float(load),
                  "failed": failed.split(), "cases": cases.split(), "tsan_reports": int(races), "commit": commit}))
EOF
    echo "$stage run $run: exit $rc in ${secs}s (load $load)${failed:+; failed: $failed}"
  done
done
stop_loops
python3 - "$OUT" "$BUSY" <<'EOF'
import collections, json, sys
out, busy = sys.argv[1], sys.argv[2]
runs = [json.loads(l) for l in open(out + "/runs.jsonl")]
summary = {"busy_loops": int(busy), "stages": {}}
lines = []
for stage in sorted({r["stage"] for r in runs}):
    rs = [r for r in runs if r["stage"] == stage]
    clean = sum(1 for r in rs if r["exit"] == 0)
    fails = collections.Counter(t for r in rs for t in r["failed"])
    cases = collections.Counter(t for r in rs for t in r.get("cases", []))
    races = sum(r.get("tsan_reports", 0) for r in rs)
    secs = sorted(r["seconds"] for r in rs)
    summary["stages"][stage] = {"runs": len(rs), "clean": clean, "failures": dict(fails), "cases": dict(cases),
                                "tsan_reports": races, "seconds_min": secs[0], "seconds_max": secs[-1],
                                "commit": rs[0]["commit"]}
    lines.append("%s: %d of %d runs clean beside %s busy loops (%d-%d s a run)%s%s" % (
        stage, clean, len(rs), busy, secs[0], secs[-1],
        "; failures: " + ", ".join("%s x%d" % kv for kv in fails.most_common()) if fails else "",
        "; ThreadSanitizer reports: %d" % races if races else ""))
    lines.extend("  %s: failed in %d run(s)" % kv for kv in cases.most_common())
json.dump(summary, open(out + "/summary.json", "w"), indent=1)
open(out + "/summary.txt", "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
EOF
