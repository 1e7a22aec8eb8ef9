#!/usr/bin/env bash
# The scaling studies (docs/SCALING.md), each with one command:
#
#   sudo scripts/scaling.sh --study=calibrate   # the simulator's constants: 1-2 hosts at 5 Gbit/s-eq (~15 min)
#   sudo scripts/scaling.sh --study=poseidon    # VGG19-22K and VGG19 on 1-16 hosts at 10 Gbit/s-eq (~25 min)
#   sudo scripts/scaling.sh --study=today       # H200 compute, 25-400 Gbit/s: emulated 8 hosts, simulated 8-256 (~30 min)
#   scripts/scaling.sh --study=servers          # apply threads and the transport bench (~15 min)
#   sudo scripts/scaling.sh --study=all         # the four in that order, on a quiet 2-core machine
#   scripts/scaling.sh --study=all --smoke      # every step at the smallest size (minutes), into /tmp
#
# Each writes bench/results/<study>/ (runs.jsonl, CSVs, README.md generated from them); an interrupted
# study resumes from runs.jsonl (--fresh starts over). Other options: scripts/scaling_study.py --help.
# Needs a build (scripts/build.sh) and python3; root for the emulated cluster (network namespaces).
set -euo pipefail
cd "$(dirname "$0")/.."
exec python3 scripts/scaling_study.py "$@"
