#!/usr/bin/env python3
"""The simulator against every run of this folder (merge auto and off): the
same flags and the compute the workers really slept, as scripts/scaling.sh
does (alpha 100 us, apply 1 ns/byte). Run from the repository root after a
build: python3 bench/results/scaling_v2/validate.py > validation.md"""
import glob, json, os, subprocess, statistics, collections
rows = collections.defaultdict(list)
for f in sorted(glob.glob('bench/results/scaling_v2/runs/*.json')):
    tag = os.path.basename(f)[:-5]
    model, h, variant, rnd = tag.split('_')[0], int(tag.split('_h')[1].split('_')[0]), tag.split('_')[-2], tag.split('_')[-1]
    if variant == 'before':
        continue
    r = json.load(open(f))[0]
    overhead = max(0, 1e6 * (r['measured_compute_s'] - r['compute_s']) / (2 * r['layers']))
    out = subprocess.run(['build/bin/nereus_bench', 'simulate', '--layer_overhead_us=%g' % overhead, '--model=' + model,
                          '--host_list=%d' % h, '--schedule=full', '--link_list=%g' % r['link_mbit'],
                          '--device_gflops=%g' % r['device_gflops'], '--model_scale=%g' % r['model_scale'],
                          '--batch=%d' % r['batch'], '--alpha_us=100', '--apply_ns_per_byte=1'],
                         capture_output=True, text=True).stdout.strip().splitlines()[-1]
    p = float(out.split(',')[5])
    rows[(model, h, variant)].append((r['iteration_s'], p, 100 * (p - r['iteration_s']) / r['iteration_s']))
print('| model | hosts | merge | runs | measured s (median) | predicted s (median) | error (median) | error range |')
print('|---|---|---|---|---|---|---|---|')
for k in sorted(rows):
    v = rows[k]
    print('| %s | %d | %s | %d | %.4f | %.4f | %+.1f%% | %+.1f%% .. %+.1f%% |' % (k[0], k[1], k[2], len(v),
          statistics.median(x[0] for x in v), statistics.median(x[1] for x in v), statistics.median(x[2] for x in v),
          min(x[2] for x in v), max(x[2] for x in v)))
