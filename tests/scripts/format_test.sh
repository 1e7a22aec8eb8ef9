#!/usr/bin/env bash
# Every C++ and CUDA source is as clang-format (.clang-format at the root)
# writes it. Prints the files that differ and how to fix them.
set -euo pipefail
SRC=${NEREUS_SOURCE_DIR:?}
cd "$SRC"
if ! command -v clang-format >/dev/null 2>&1; then
  echo "SKIP: clang-format is not installed (scripts/install_deps.sh installs it)"
  exit 77
fi
mapfile -t files < <(find common server worker bench tests proto \
  \( -name '*.h' -o -name '*.cc' -o -name '*.cu' -o -name '*.cuh' \) -not -path '*/install_consumer_work/*' | sort)
# Many files per clang-format process, as many processes as cores: one
# process per file took minutes on a loaded 2-core machine (ctest's timeout).
mapfile -t bad < <(printf '%s\n' "${files[@]}" | xargs -d '\n' -P "$(nproc)" -n 32 clang-format --dry-run -Werror 2>&1 |
  sed -nE 's/^([^:]+):[0-9]+:[0-9]+: error: .*/\1/p' | sort -u)
if [ ${#bad[@]} -gt 0 ]; then
  echo "FAIL: ${#bad[@]} file(s) differ from clang-format's layout:"
  printf '  %s\n' "${bad[@]}"
  echo "fix with: clang-format -i ${bad[*]}"
  exit 1
fi
echo "ok: ${#files[@]} files formatted"
