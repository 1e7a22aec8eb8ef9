#!/usr/bin/env bash
# Clang's thread-safety analysis over the sources that use nereus::Mutex:
#   scripts/thread_safety.sh [BUILD_DIR]   (default build/, configured by
#   scripts/build.sh, whose compile_commands.json gives each source's flags)
# Every product .cc (not tests/, not generated, not .cu) that includes
# common/base/mutex.h, directly or through project headers, is compiled (as
# the build compiles it: alone, or in its unity batch) with
# clang++ -fsyntax-only -Wthread-safety -Werror=thread-safety and the flags
# CMake gave it. The code of a CUDA-only .cc (worker/bridge/cuda_staging.cc)
# sits behind NEREUS_HAVE_CUDA, so it is analysed only in a build that found
# the CUDA toolkit (no GPU needed); in a CPU-only build it is an empty shell. First, tests/common/base/thread_safety_canary.cc, deliberately
# wrong, must draw exactly the errors it expects (clang -verify), so the check
# cannot pass because the annotations expanded to nothing. Run by ctest as
# thread_safety_test.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$(cd "${1:-$ROOT/build}" && pwd)
CXX=${NEREUS_CLANGXX:-clang++}
if ! command -v "$CXX" >/dev/null 2>&1; then
  echo "SKIP: $CXX is not installed (scripts/install_deps.sh installs clang)"
  exit 77
fi
DB="$BUILD/compile_commands.json"
[ -f "$DB" ] || { echo "FAIL: no $DB (configure with scripts/build.sh first)" >&2; exit 1; }

# Only the analysis: other warnings are the GCC build's business.
CHECK=(-fsyntax-only -Wno-everything -Wthread-safety -Werror=thread-safety)

echo "== canary: tests/common/base/thread_safety_canary.cc must draw its expected errors"
"$CXX" -std=c++17 -I"$ROOT" "${CHECK[@]}" -Xclang -verify "$ROOT/tests/common/base/thread_safety_canary.cc"

# One line per source: the NUL-free command that checks it.
mapfile -t commands < <(python3 - "$ROOT" "$DB" "$CXX" "${CHECK[@]}" <<'EOF'
import json, os, re, shlex, sys
root, db, cxx, check = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
include = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)
memo = {}
def uses_mutex(path, seen):
    """Whether `path` includes common/base/mutex.h through project headers."""
    if path in memo:
        return memo[path]
    if path in seen:
        return False
    seen.add(path)
    try:
        text = open(path, encoding="utf-8", errors="replace").read()
    except OSError:
        return False
    found = False
    for inc in include.findall(text):
        if inc == "common/base/mutex.h":
            found = True
            break
        for base in (root, os.path.dirname(path)):
            cand = os.path.normpath(os.path.join(base, inc))
            if cand.startswith(root + os.sep) and os.path.isfile(cand) and uses_mutex(cand, seen):
                found = True
                break
        if found:
            break
    memo[path] = found
    return found

unity_include = re.compile(r'^\s*#\s*include\s*"(/[^"]+)"', re.M)
for entry in json.load(open(db)):
    src = os.path.normpath(os.path.join(entry["directory"], entry["file"]))
    rel = os.path.relpath(src, root)
    if os.sep + "Unity" + os.sep + "unity_" in src and src.endswith(".cxx"):
        # A unity batch of CMake's (common/cmake/NereusUnity.cmake): checked
        # as it is compiled, when one of the sources it includes uses a Mutex.
        parts = [os.path.normpath(i) for i in unity_include.findall(open(src).read())]
        # Product code only, as for single files: the test groups' batches
        # (tests/CMakeLists.txt) are left out.
        users = [os.path.relpath(i, root) for i in parts
                 if i.endswith(".cc") and not os.path.relpath(i, root).startswith("tests" + os.sep)
                 and uses_mutex(i, set())]
        if not users:
            continue
        rel = "unity batch of " + " ".join(users)
    elif rel.startswith(("..", "tests" + os.sep, "build")) or not rel.endswith(".cc"):
        continue
    elif not uses_mutex(src, set()):
        continue
    args = entry["arguments"] if "arguments" in entry else shlex.split(entry["command"])
    out, skip = [cxx], False
    for a in args[1:]:
        if skip:
            skip = False
        elif a in ("-o", "-MF", "-MT", "-MQ"):
            skip = True
        elif a in ("-c", "-MD", "-MMD") or a == src or a == entry["file"]:
            continue
        else:
            out.append(a)
    print(rel + "\t" + shlex.join(["cd", entry["directory"]]) + " && " + shlex.join(out + check + [src]))
EOF
)
[ ${#commands[@]} -gt 0 ] || { echo "FAIL: no source in $DB includes common/base/mutex.h" >&2; exit 1; }

echo "== ${#commands[@]} sources with -Wthread-safety"
start=$SECONDS
failed=0
printf '%s\n' "${commands[@]}" | xargs -d '\n' -P "$(nproc)" -I{} bash -c '
  rel=${1%%$'"'"'\t'"'"'*}; cmd=${1#*$'"'"'\t'"'"'}
  if out=$(eval "$cmd" 2>&1); then echo "ok   $rel"; else printf "FAIL %s\n%s\n" "$rel" "$out"; exit 1; fi' _ {} ||
  failed=1
echo "== $((SECONDS - start)) s"
if [ "$failed" != 0 ]; then
  echo "FAIL: thread-safety errors above (see common/base/thread_annotations.h)" >&2
  exit 1
fi
echo "ok: ${#commands[@]} sources pass -Wthread-safety"
