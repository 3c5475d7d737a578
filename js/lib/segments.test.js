import { test } from "node:test";
import assert from "node:assert/strict";
import { occurrenceSnippet, pointLabels, textSegments, tokenContext } from "./segments.js";

test("textSegments rebuilds the text from offsets and keeps tokens as plain strings", () => {
  const text = "t-SNE maps <img src=x> data.";
  const tokens = ["[CLS]", "t", "-", "sne", "maps", "<", "img", "src", "=", "x", ">", "data", ".", "[SEP]"];
  const offsets = [
    null,
    [0, 1],
    [1, 2],
    [2, 5],
    [6, 10],
    [11, 12],
    [12, 15],
    [16, 19],
    [19, 20],
    [20, 21],
    [21, 22],
    [23, 27],
    [27, 28],
    null,
  ];
  const pieces = textSegments(text, tokens, offsets);
  assert.equal(
    pieces
      .filter((p) => !p.special)
      .map((p) => p.text)
      .join(""),
    text,
  );
  assert.deepEqual(pieces[0], { text: "[CLS]", token: 0, special: true });
  assert.equal(pieces.find((p) => p.token === 3).text, "SNE");
  assert.equal(pieces.find((p) => p.token === 5).text, "<");
  assert.equal(pieces.at(-1).token, 13);
  const plain = textSegments("", ["a", "<b>"], null);
  assert.deepEqual(
    plain.map((p) => p.text),
    ["a", " ", "<b>"],
  );
});

test("tokenContext gives the surrounding words with ellipses", () => {
  const text = "one two three four five six seven eight nine ten";
  const tokens = text.split(" ");
  let pos = 0;
  const offsets = tokens.map((t) => {
    const s = text.indexOf(t, pos);
    pos = s + t.length;
    return [s, pos];
  });
  const c = tokenContext(text, tokens, offsets, 5, 2);
  assert.equal(c.token, "six");
  assert.equal(c.before, "…four five ");
  assert.equal(c.after, " seven eight…");
  const first = tokenContext(text, tokens, offsets, 0, 2);
  assert.equal(first.before, "");
  const noOffsets = tokenContext("", ["[CLS]", "a", "b", "[SEP]"], null, 1, 1);
  assert.deepEqual(noOffsets, { before: "[CLS] ", token: "a", after: " b …" });
});

test("the map labels a word's occurrences by Python's labels, else by the words round each, never all the same", () => {
  const sentences = ["He sat on the bank.", "The Bank raised rates.", "A bank by the bank of the river.", "bank"];
  const text = sentences.join("\n");
  const offsets = [...text.matchAll(/bank/gi)].map((m) => [m.index, m.index + 4]);
  const tokens = offsets.map(([s, e]) => text.slice(s, e));
  const doc = { text, tokens, offsets, word: "bank" };
  assert.deepEqual(pointLabels(doc), ["the bank", "The Bank raised", "A bank by", "the bank of", "bank"]);
  assert.equal(
    occurrenceSnippet(
      { ...doc, text: `${"x".repeat(40)} bank ${"y".repeat(40)}`, offsets: [[41, 45]], tokens: ["bank"] },
      0,
    ).length,
    22,
  );
  const senses = ["river", "money", "river", "river", "money"];
  assert.deepEqual(pointLabels({ ...doc, labels: senses }), senses, "Python's labels, one a token, come first");
  assert.deepEqual(
    pointLabels({ ...doc, labels: ["too", "few"] }),
    pointLabels(doc),
    "labels of another length are not",
  );
  const one = {
    text: "a b",
    tokens: ["a", "b"],
    offsets: [
      [0, 1],
      [2, 3],
    ],
    word: "",
  };
  assert.equal(pointLabels(one), one.tokens, "a text's tokens label themselves");
});
