import { test } from "node:test";
import assert from "node:assert/strict";
import { MODE_NAMES, sourceOf } from "./sources.js";
import { headerText } from "../views/header.js";

const doc = { tokens: ["a", "b"] };

test("the modes are the Python table's, in its order, and an unknown one reads as attention", () => {
  assert.deepEqual(MODE_NAMES, ["attention", "hidden", "query-key", "norm", "head-output"]);
  assert.equal(sourceOf("no-such-mode"), sourceOf("attention"));
  assert.equal(sourceOf("hidden").perHead, false);
  assert.deepEqual(sourceOf("query-key").pointRoles, ["query", "key"]);
  assert.deepEqual(sourceOf("attention").pointRoles, []);
  assert.equal(sourceOf("head-output").partners, "neighbours");
});

test("the caption names each mode's map from its source, the perplexity where it is used", () => {
  const caption = (mode) => headerText({ doc, mode, layer: 2, head: 5, perplexity: 30 }).caption;
  assert.equal(caption("attention"), "attention-head t-SNE · layer 2 · head 5");
  assert.equal(caption("hidden"), "hidden-state t-SNE · layer 2 (perplexity 30)");
  assert.equal(caption("query-key"), "queries (filled) and keys (rings) t-SNE · layer 2 · head 5");
  assert.equal(caption("norm"), "value-weighted attention t-SNE · layer 2 · head 5");
  assert.equal(caption("head-output"), "head-output t-SNE · layer 2 · head 5 (perplexity 30)");
});
