#!/usr/bin/env python3
"""Draws Nereus's include graph and checks that it is a tree of floors.

Every C++ file sits on a floor; a file may include files of its own component
or of a lower floor, never of a higher one nor of a sibling on its own floor.
One line per folder (FLOORS below; a folder's subfolders are part of it):

  0 proto, public headers     proto/ (and the generated *.pb.h), common/include/
  1 common/base               Status, locks, annotations, binary init
  2 common/net                the network runtime
  3 common/update,            the update maths (solver steps, SFB, HybComm);
    common/launch             the launcher's parts
  4 server, worker/client,    the servers and coordinator; the client;
    worker/synthetic          the synthetic model
  5 worker/trainer            the Caffe-style trainer (and its tools/)
  6 worker/bridge             the trainer over the client
  7 worker                    nereus_worker's main
  8 bench/sim                 the simulator
  9 bench/harness             what benchmarks and tests run jobs with
 10 bench                     nereus_bench
 11 tests                     tests/

CUDA stays out of common/, server/ and worker/client/: no file there may
include a CUDA header (<cuda_runtime.h>, <cublas_v2.h>, <curand.h>, any
<cuda*.h>, <cu*.h> of the toolkit's libraries, <thrust/...>, <cub/...>) or a
file of worker/trainer/gpu/, and none may be a .cu/.cuh file; the servers and
the client library build and run without the toolkit. (common/base/host_device.h,
which only defines a macro, is how common/ shares arithmetic with GPU code.)

Every header's include guard is NEREUS_ and its path in capitals, '/' and '.'
as '_', with a trailing '_' (worker/trainer/blob.h: NEREUS_WORKER_TRAINER_BLOB_H_;
a public header by the path it is included as: nereus/client.h:
NEREUS_CLIENT_H_); --check fails on a guard that does not match.

The public headers (common/include/nereus/, which `cmake --install` ships) must
stand alone: they may include other public headers ("nereus/...") and the
standard library (<vector>: no folder, no .h; or, for a C header such as
nereus/c_api.h, one of the C standard library's, <stdint.h>), nothing else;
--check fails on any other include of theirs.

Only `#include "..."` lines count for the floors. A quoted include is resolved
against the including file's folder, the repository root and the public
include folders; one that resolves nowhere is placed by its path.

  include_graph.py --check              exit 1, naming every include that runs
                                        up or sideways (and files on no floor)
  include_graph.py --dot FILE           write the graph (graphviz dot)
  include_graph.py --png FILE           the same, rendered by graphviz's `dot`
  --expand DIR                          draw DIR's files (x.h with x.cc), not
                                        DIR as one node
  --omit COMPONENT                      leave COMPONENT (e.g. tests) out
Python 3 standard library only; graphviz only for --png.
"""

import argparse
import collections
import os
import re
import shutil
import subprocess
import sys

# (component, floor), most specific prefix first. A component is one node of
# the picture; files of one component may include each other freely.
FLOORS = [
    ("proto/", "proto", 0),
    ("common/include/", "public headers", 0),
    ("common/base/", "common/base", 1),
    ("common/net/", "common/net", 2),
    ("common/launch/", "common/launch", 3),
    ("common/update/", "common/update", 3),
    ("server/", "server", 4),
    ("worker/client/", "worker/client", 4),
    ("worker/synthetic/", "worker/synthetic", 4),
    ("worker/trainer/", "worker/trainer", 5),
    ("worker/bridge/", "worker/bridge", 6),
    ("worker/", "worker", 7),
    ("bench/sim/", "bench/sim", 8),
    ("bench/harness/", "bench/harness", 9),
    ("bench/", "bench", 10),
    ("tests/", "tests", 11),
]
INCLUDE_DIRS = ["", "common/include"]
PUBLIC_INCLUDE_DIRS = [d for d in INCLUDE_DIRS if d]
SOURCE_EXTENSIONS = (".h", ".hh", ".hpp", ".cuh", ".cc", ".cpp", ".cxx", ".c", ".cu")
HEADER_EXTENSIONS = (".h", ".hh", ".hpp", ".cuh")
SKIP_DIRS = {".git", ".ci", "build", "docs", "third_party"}
INCLUDE_RE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
ANY_INCLUDE_RE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')
CUDA_FREE = ("common/", "server/", "worker/client/")
CUDA_HEADER_RE = re.compile(
    r"^(cuda[\w.]*\.h|cu(blas|blasLt|rand|fft|sparse|solver|dnn|tensor)\w*\.h|nvrtc\.h|nvToolsExt\w*\.h"
    r"|device_launch_parameters\.h|(thrust|cub|cuda)/.*)$")
GPU_SUPPORT = "worker/trainer/gpu/"
# The C standard library's headers (C17, 7.1.2): what a public C header
# (nereus/c_api.h) may include besides other public headers.
C_STANDARD_HEADERS = frozenset(
    "assert.h complex.h ctype.h errno.h fenv.h float.h inttypes.h iso646.h limits.h locale.h math.h setjmp.h "
    "signal.h stdalign.h stdarg.h stdatomic.h stdbool.h stddef.h stdint.h stdio.h stdlib.h stdnoreturn.h string.h "
    "tgmath.h threads.h time.h uchar.h wchar.h wctype.h".split())


def floor_of(path):
    """(component, floor) of a repository-relative path, or None."""
    for prefix, component, floor in FLOORS:
        if path.startswith(prefix):
            return (component, floor)
    return None


def source_files(root):
    for folder, dirs, files in os.walk(root):
        rel = os.path.relpath(folder, root)
        dirs[:] = sorted(d for d in dirs
                         if not (rel == "." and (d in SKIP_DIRS or d.startswith("build")))
                         and not d.startswith("."))
        rel_posix = rel.replace(os.sep, "/")
        if rel_posix == "scripts" or rel_posix.startswith("scripts/"):
            dirs[:] = []  # scripts/ holds no C++.
            continue
        for name in sorted(files):
            if name.endswith(SOURCE_EXTENSIONS):
                yield os.path.normpath(os.path.join(rel, name)).replace(os.sep, "/")


def resolve(root, including, target):
    """Repository-relative path of an include (generated files by name)."""
    candidates = [os.path.join(os.path.dirname(including), target)]
    candidates += [os.path.join(d, target) for d in INCLUDE_DIRS]
    for c in candidates:
        c = os.path.normpath(c).replace(os.sep, "/")
        if os.path.isfile(os.path.join(root, c)):
            return c
    return os.path.normpath(target).replace(os.sep, "/")


def matching_lines(root, f, regex):
    """(line number, match) of each line of the source file f that regex matches, in order."""
    with open(os.path.join(root, f), encoding="utf-8", errors="replace") as fh:
        for number, line in enumerate(fh, 1):
            m = regex.match(line)
            if m:
                yield number, m


def read_includes(root):
    """[(file, line number, included path, as written)] over every source file."""
    edges = []
    for f in source_files(root):
        for number, m in matching_lines(root, f, INCLUDE_RE):
            edges.append((f, number, resolve(root, f, m.group(1)), m.group(1)))
    return edges


GUARD_RE = re.compile(r"^\s*#\s*ifndef\s+(\w+)")


def expected_guard(path):
    """The include guard a header at this repository path must use."""
    for d in INCLUDE_DIRS:
        if d and path.startswith(d + "/"):
            path = path[len(d) + 1:]  # nereus/client.h
            return re.sub(r"[/.\-]", "_", path).upper() + "_"
    return "NEREUS_" + re.sub(r"[/.\-]", "_", path).upper() + "_"


def guard_problems(root):
    """Messages naming each header whose include guard does not match its path."""
    problems = []
    for f in source_files(root):
        if not f.endswith(HEADER_EXTENSIONS):
            continue
        want = expected_guard(f)
        with open(os.path.join(root, f), encoding="utf-8", errors="replace") as fh:
            guard = None
            for line in fh:
                m = GUARD_RE.match(line)
                if m:
                    guard = m.group(1)
                    break
        if guard is None:
            problems.append("%s: no include guard (expected #ifndef %s)" % (f, want))
        elif guard != want:
            problems.append("%s: include guard %s does not match its path (expected %s)" % (f, guard, want))
    return problems


def cuda_problems(root):
    """Messages naming each CUDA include (or CUDA source) in a CUDA-free component."""
    problems = []
    for f in source_files(root):
        if not f.startswith(CUDA_FREE):
            continue
        if f.endswith((".cu", ".cuh")):
            component = next(c for c in CUDA_FREE if f.startswith(c)).rstrip("/")
            problems.append("%s: a CUDA source in %s, which must build without CUDA" % (f, component))
            continue
        for number, m in matching_lines(root, f, ANY_INCLUDE_RE):
            target = m.group(2)
            resolved = resolve(root, f, target)
            if CUDA_HEADER_RE.match(target) or resolved.startswith(GPU_SUPPORT):
                problems.append('%s:%d: includes "%s": common/, server/ and worker/client/ stay free of CUDA'
                                % (f, number, target))
    return problems


def public_header_problems(root):
    """Messages naming each include of a public header that is neither a public header nor the standard library."""
    problems = []
    for f in source_files(root):
        if not any(f.startswith(d + "/") for d in PUBLIC_INCLUDE_DIRS):
            continue
        for number, m in matching_lines(root, f, ANY_INCLUDE_RE):
            kind, target = m.groups()
            if kind == "<":
                # <vector>, <cstdint>: the C++ standard library; <stdint.h>: the C one's (a C header's).
                ok = ("/" not in target and "." not in target) or target in C_STANDARD_HEADERS
            else:
                ok = target.startswith("nereus/") and any(
                    os.path.isfile(os.path.join(root, d, target)) for d in PUBLIC_INCLUDE_DIRS)
            if not ok:
                problems.append('%s:%d: a public header includes %s%s%s: only public headers ("nereus/...") '
                                "and the standard library may be included there"
                                % (f, number, kind, target, ">" if kind == "<" else '"'))
    return problems


def violations(root, edges):
    """Messages naming each include that breaks the floors."""
    problems = []
    for f in source_files(root):
        if floor_of(f) is None:
            problems.append("%s: on no floor (add its folder to FLOORS in scripts/include_graph.py)" % f)
    for f, number, target, written in edges:
        src, dst = floor_of(f), floor_of(target)
        if src is None or dst is None or src[0] == dst[0]:
            continue
        if any(f.startswith(d + "/") for d in PUBLIC_INCLUDE_DIRS):
            continue  # A public header's includes: public_header_problems names them.
        what = '%s:%d: includes "%s"' % (f, number, written)
        if written != target:
            what += " (%s)" % target
        if dst[1] > src[1]:
            problems.append("%s: %s (floor %d) may not include %s (floor %d), a higher floor"
                            % (what, src[0], src[1], dst[0], dst[1]))
        elif dst[1] == src[1]:
            problems.append("%s: %s and %s are siblings on floor %d and may not include each other"
                            % (what, src[0], dst[0], src[1]))
    return problems


def node_of(path, expand):
    for d in expand:
        d = d.rstrip("/")
        if path.startswith(d + "/"):
            rest = path[len(d) + 1:]
            if rest.startswith("include/"):
                return d + "/" + rest[len("include/"):]  # A public header, e.g. nereus/client.h.
            # One node per file stem: x.h and x.cc together.
            return d + "/" + os.path.splitext(rest)[0]
    component = floor_of(path)
    if component is None:
        return os.path.dirname(path) or path
    # Sub-folders of the trainer are drawn as their own nodes.
    if component[0] == "worker/trainer":
        parts = path.split("/")
        if len(parts) > 3:
            return "/".join(parts[:3])
    return component[0]


def dot(root, edges, expand, omit=()):
    """The graph of components (and of the files of `expand`) in graphviz dot.

    Drawn top down: the includer above what it includes, so proto is the
    ground floor. Components in `omit` (e.g. tests) are left out.
    """
    expand = [d.rstrip("/") for d in expand]
    omitted = lambda path: floor_of(path) is not None and floor_of(path)[0] in omit
    bad = set()
    for f, _, target, _ in edges:
        src, dst = floor_of(f), floor_of(target)
        if src and dst and src[0] != dst[0] and dst[1] >= src[1]:
            bad.add((node_of(f, expand), node_of(target, expand)))
    counts = collections.Counter()
    nodes = {}
    for f in source_files(root):
        if not omitted(f):
            nodes[node_of(f, expand)] = floor_of(f)
    for f, _, target, _ in edges:
        if omitted(f) or omitted(target):
            continue
        a, b = node_of(f, expand), node_of(target, expand)
        nodes.setdefault(b, floor_of(target))
        if a != b:
            counts[(a, b)] += 1
    out = ["digraph nereus_includes {",
           '  graph [rankdir=TB, nodesep=0.3, ranksep=0.5, fontname="Helvetica", fontsize=12, '
           'label="Nereus include graph: an arrow runs from the includer to the included (number: #include lines)'
           '", labelloc=t];',
           '  node [shape=box, style="rounded,filled", fillcolor="#f4f4f4", fontname="Helvetica", fontsize=11];',
           '  edge [color="#888888", arrowsize=0.6, fontname="Helvetica", fontsize=8];']
    clusters = collections.defaultdict(list)
    for n, fl in sorted(nodes.items()):
        inside = [d for d in expand if n.startswith(d + "/")]
        if inside:
            clusters[inside[0]].append(n)
            continue
        label = n if fl is None else "%s\\nfloor %d" % (n, fl[1])
        out.append('  "%s" [label="%s"];' % (n, label))
    for i, d in enumerate(sorted(clusters)):
        fl = floor_of(d + "/")
        out.append('  subgraph cluster_%d { label="%s (floor %d)"; style="rounded,dashed"; color="#999999";'
                   % (i, d, fl[1] if fl else -1))
        for n in clusters[d]:
            out.append('    "%s" [label="%s", fillcolor="#e8f0fb"];' % (n, n[len(d) + 1:]))
        out.append("  }")
    for (a, b), n in sorted(counts.items()):
        attrs = ['label="%d"' % n] if n > 1 else []
        if (a, b) in bad:
            attrs.append("color=red, penwidth=2")
        out.append('  "%s" -> "%s"%s;' % (a, b, " [" + ", ".join(attrs) + "]" if attrs else ""))
    out.append("}")
    return "\n".join(out) + "\n"


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."),
                        help="repository root (default: this script's parent folder)")
    parser.add_argument("--check", action="store_true", help="fail naming every include that breaks the floors")
    parser.add_argument("--dot", help="write the graph in graphviz dot to this file")
    parser.add_argument("--png", help="render the graph to this PNG with graphviz's dot")
    parser.add_argument("--expand", action="append", default=[], help="draw this folder's files as nodes")
    parser.add_argument("--omit", action="append", default=[], help="leave this component out of the picture")
    args = parser.parse_args(argv)
    root = os.path.abspath(args.root)
    if not os.path.isdir(root):
        parser.error("--root %s is not a folder" % root)
    if not (args.check or args.dot or args.png):
        parser.error("give --check, --dot FILE or --png FILE")
    edges = read_includes(root)
    status = 0
    if args.dot or args.png:
        text = dot(root, edges, args.expand, args.omit)
        if args.dot:
            with open(args.dot, "w") as fh:
                fh.write(text)
        if args.png:
            if shutil.which("dot") is None:
                print("include_graph.py: --png needs graphviz's `dot` (apt-get install graphviz)", file=sys.stderr)
                return 2
            subprocess.run(["dot", "-Tpng", "-o", args.png], input=text.encode(), check=True)
    if args.check:
        problems = violations(root, edges)
        guards = guard_problems(root)
        public = public_header_problems(root)
        cuda = cuda_problems(root)
        for p in problems + cuda + guards + public:
            print(p)
        if problems:
            print("include_graph.py: %d include(s) break the floors (FLOORS in scripts/include_graph.py)"
                  % len(problems), file=sys.stderr)
            status = 1
        if guards:
            print("include_graph.py: %d header(s) with an include guard that does not match the path" % len(guards),
                  file=sys.stderr)
            status = 1
        if cuda:
            print("include_graph.py: %d CUDA include(s) or source(s) in common/, server/ or worker/client/" % len(cuda),
                  file=sys.stderr)
            status = 1
        if public:
            print("include_graph.py: %d include(s) of public headers that do not stand alone" % len(public),
                  file=sys.stderr)
            status = 1
        if not problems and not guards and not public and not cuda:
            print("include_graph.py: %d includes in %d files, all down the floors; no CUDA in common/, server/, "
                  "worker/client/; every include guard matches; the public headers stand alone"
                  % (len(edges), len(set(e[0] for e in edges))))
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
