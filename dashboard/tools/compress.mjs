// Writes a brotli (.br) and a gzip (.gz) copy beside each text asset of dist/, so that the
// router serves them compressed without compressing at run time. Prints the sizes.
import { readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join, relative } from "node:path";
import { brotliCompressSync, constants, gzipSync } from "node:zlib";

const dist = new URL("../dist/", import.meta.url).pathname;
const TEXT = /\.(html|js|mjs|css|svg|json|txt|map)$/;

function* files(dir) {
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) yield* files(p);
    else yield p;
  }
}

let raw = 0;
let br = 0;
let gz = 0;
for (const p of [...files(dist)]) {
  if (p.endsWith(".br") || p.endsWith(".gz")) continue;
  const data = readFileSync(p);
  raw += data.length;
  if (!TEXT.test(p)) {
    br += data.length;
    gz += data.length;
    continue;
  }
  const b = brotliCompressSync(data, {
    params: {
      [constants.BROTLI_PARAM_QUALITY]: 11,
      [constants.BROTLI_PARAM_SIZE_HINT]: data.length,
    },
  });
  const g = gzipSync(data, { level: 9 });
  writeFileSync(`${p}.br`, b);
  writeFileSync(`${p}.gz`, g);
  br += b.length;
  gz += g.length;
  console.log(`${relative(dist, p).padEnd(36)} ${String(data.length).padStart(8)} B  br ${String(b.length).padStart(7)} B  gzip ${String(g.length).padStart(7)} B`);
}
console.log(`total${" ".repeat(32)}${String(raw).padStart(8)} B  br ${String(br).padStart(7)} B  gzip ${String(gz).padStart(7)} B`);
if (gz > 500 * 1024) {
  console.error(`the dashboard is ${gz} B gzip-compressed: over the 500 KB budget`);
  process.exit(1);
}
