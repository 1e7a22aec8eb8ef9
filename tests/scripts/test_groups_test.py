#!/usr/bin/env python3
"""Every test of a grouped test binary (nereus_add_test_group in
tests/CMakeLists.txt) runs under exactly one ctest test: the filters that
CMake read from each file's TEST lines cover the binary's whole list, once.
A test written in a form the reader misses would otherwise never run.
  test_groups_test.py BUILD_DIR
"""
import fnmatch
import json
import os
import subprocess
import sys


def main():
    build = sys.argv[1]
    info = json.loads(subprocess.run(["ctest", "--show-only=json-v1"], cwd=build, stdout=subprocess.PIPE,
                                     check=True, text=True).stdout)
    groups = {}
    for t in info["tests"]:
        cmd = t.get("command") or []
        filters = [a[len("--gtest_filter="):] for a in cmd[1:] if a.startswith("--gtest_filter=")]
        if filters:
            groups.setdefault(cmd[0], []).append((t["name"], filters[0].split(":")))
    if not groups:
        print("no grouped test binary in this build (one without the trainer): nothing to check")
        return 77
    failures = []
    for binary, tests in sorted(groups.items()):
        listed = subprocess.run([binary, "--gtest_list_tests"], stdout=subprocess.PIPE, check=True, text=True).stdout
        names, suite = [], None
        for line in listed.splitlines():
            if not line.strip() or line.startswith("Running main()"):
                continue
            if not line.startswith(" "):
                suite = line.split()[0]
            else:
                names.append(suite + line.split()[0])
        for name in names:
            runs = [t for t, pats in tests if any(fnmatch.fnmatchcase(name, p) for p in pats)]
            if len(runs) != 1:
                failures.append("%s: %s runs under %d ctest tests %s" % (os.path.basename(binary), name, len(runs), runs))
        print("%s: %d tests, %d ctest tests" % (os.path.basename(binary), len(names), len(tests)))
    if failures:
        print("\n".join(failures), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
