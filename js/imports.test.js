// The modules' imports (static, dynamic and JSDoc `import("...")` types alike): every relative one names a file
// that exists, and no module reaches itself through them (no import circle).

import test from "node:test";
import assert from "node:assert/strict";
import { readFileSync, readdirSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = dirname(fileURLToPath(import.meta.url));
const IMPORT = /(?:\bfrom\s*|\bimport\s*\(\s*|^\s*import\s+)["'](\.{1,2}\/[^"']+)["']/gm;

/** Every .js module under `dir` (tests included: they must not close a circle either). @param {string} dir */
function modules(dir) {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return modules(path);
    return entry.name.endsWith(".js") ? [path] : [];
  });
}

/** The relative imports of a module's source, as written. @param {string} source */
function importsOf(source) {
  return [...source.matchAll(IMPORT)].map((m) => m[1]);
}

/** module -> the modules it imports, paths relative to js/. @param {string[]} files */
function importGraph(files) {
  return new Map(
    files.map((file) => {
      const targets = importsOf(readFileSync(file, "utf8")).map((t) => relative(ROOT, resolve(dirname(file), t)));
      return [relative(ROOT, file), [...new Set(targets)].sort()];
    }),
  );
}

/**
 * The import circles of `graph`, each as the path of modules that closes it ([] when none).
 * @param {Map<string, string[]>} graph
 */
function circles(graph) {
  /** @type {Map<string, number>} 1: on the current path, 2: done */
  const seen = new Map();
  /** @type {string[][]} */
  const found = [];
  /** @param {string} node @param {string[]} path */
  function visit(node, path) {
    seen.set(node, 1);
    path.push(node);
    for (const next of graph.get(node) || []) {
      if (seen.get(next) === 1) found.push([...path.slice(path.indexOf(next)), next]);
      else if (!seen.has(next)) visit(next, path);
    }
    path.pop();
    seen.set(node, 2);
  }
  for (const node of [...graph.keys()].sort()) if (!seen.has(node)) visit(node, []);
  return found;
}

const graph = importGraph(modules(ROOT));

test("every relative import names a module that exists", () => {
  const known = new Set(graph.keys());
  const missing = [...graph].flatMap(([file, targets]) =>
    targets.filter((t) => !known.has(t)).map((t) => `${file} -> ${t}`),
  );
  assert.deepEqual(missing, []);
  assert.ok(graph.size > 90, `only ${graph.size} modules found`);
});

test("no import circle: no module reaches itself through its imports", () => {
  assert.deepEqual(
    circles(graph).map((circle) => circle.join(" -> ")),
    [],
  );
});

test("the circle check finds a circle, and reads type imports too", () => {
  const g = new Map([
    ["a.js", ["b.js"]],
    ["b.js", ["c.js"]],
    ["c.js", ["a.js"]],
    ["d.js", ["a.js"]],
  ]);
  assert.deepEqual(circles(g), [["a.js", "b.js", "c.js", "a.js"]]);
  assert.deepEqual(
    circles(
      new Map([
        ["a.js", ["b.js"]],
        ["b.js", []],
      ]),
    ),
    [],
  );
  const q = '"'; // not written out: this file's own imports would name them
  const source = `/** @typedef {import(${q}../store/state.js${q}).State} S */\nimport { x } from ${q}./y.js${q};\n`;
  assert.deepEqual(importsOf(source), ["../store/state.js", "./y.js"]);
});
