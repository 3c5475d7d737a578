// Why a head attends, in the inspector (js/views/inspector.js): a click on a token in the map pins it as the query
// and opens the token tab, which lists its partners in the selected head (the keys it attends to most, the edges
// drawn on hover, data-testid="headsne-attribution-partners"); a click on one asks Python (`attribution_request`)
// for that edge's score split into (query-side, key-side) component pairs and opens the edge tab, where the answer
// (`attribution`, data-testid="headsne-attribution") lists the largest, or the library's error. In the heads tab,
// under the related heads (data-testid="headsne-composition"): a button asks for the composition links (control
// "composition"), then the earlier heads feeding the selected head's queries, keys and values most, each a button
// that selects that head. Text via textContent only.

import { disposer, el, span } from "../../lib/dom.js";
import { headOf, partnersAt } from "../../store/state.js";
import { occurrenceParts } from "../tooltip.js";

/**
 * @typedef {import("../../store/state.js").State} State
 * @typedef {{query: string, key: string, score: number, share: number | null}} Pair
 * @typedef {{kind: string, layer: number, head: number, score: number}} Link
 */

const SIDES = /** @type {Record<string, string>} */ ({ q: "queries", k: "keys", v: "values" });

/** A token as the panel names it: its text and #index. @param {string[]} tokens @param {number} t */
export function tokenName(tokens, t) {
  return `${JSON.stringify(tokens[t] ?? "?")} #${t}`;
}

/** One pair's line: "key side: L0 H2 · query side: embedding · 61 % of the score (0.312)". @param {Pair} p */
export function pairLine(p) {
  const share = p.share == null ? "" : ` · ${Math.round(p.share * 100)} % of the score`;
  return `key side: ${p.key} · query side: ${p.query}${share} (${p.score.toFixed(3)})`;
}

/**
 * What the answer says above its pairs: what is computing, the error, or the edge and its score.
 * @param {Record<string, any> | null} a the `attribution` trait
 * @param {string[]} tokens
 */
export function attributionNote(a, tokens) {
  if (!a) return "click a token in the map, then one of its partners: why it attends there";
  const edge = `L${a.layer} H${a.head}: ${tokenName(tokens, a.i)} → ${tokenName(tokens, a.j)}`;
  if (a.state === "running") return `${edge}: attributing the score (a forward pass with components at first)…`;
  if (a.state === "error") return `${edge}: ${a.error}`;
  const time = Number.isFinite(a.seconds) ? `, ${a.seconds.toFixed(2)} s` : "";
  return `${edge}: score ${Number(a.score).toFixed(3)} = the sum of ${a.n_pairs} pairs${time}; the largest:`;
}

/** A composition link's button text: "keys ← L1 H3 · 0.42". @param {Link} link */
export function linkLine(link) {
  return `${SIDES[link.kind] ?? link.kind} ← L${link.layer} H${link.head} · ${link.score.toFixed(2)}`;
}

/**
 * The composition links of the selected head: the button that asks for them, what is computing, the error, or the
 * earlier heads feeding it, each a button that selects that head.
 * @param {{links: HTMLElement, ask: HTMLButtonElement}} parts
 * @param {State} s
 * @param {import("../../store/intents.js").Intents} intents
 */
function fillLinks({ links, ask }, s, intents) {
  const c = s.composition;
  const { layer, head } = headOf(s);
  links.dataset.state = c?.state ?? "";
  if (!c || c.state === "running") {
    ask.disabled = Boolean(c);
    ask.textContent = c ? "computing the composition links…" : `which earlier heads feed L${layer} H${head}?`;
    links.replaceChildren(ask);
    return;
  }
  if (c.state === "error") {
    ask.disabled = false;
    links.replaceChildren(ask, el("div", { className: "hs-why-note", text: String(c.error) }));
    return;
  }
  const found = /** @type {Link[]} */ (c.links ?? []);
  const heading = span(
    "hs-legend-title",
    found.length ? `L${c.layer} H${c.head} is fed by` : `L${c.layer} H${c.head}: no earlier head`,
  );
  links.replaceChildren(
    heading,
    ...found.map((link) => {
      const b = el("button", {
        className: "hs-related hs-composition",
        dataset: { layer: String(link.layer), head: String(link.head), kind: link.kind },
        title: `select layer ${link.layer} head ${link.head}: it feeds the ${SIDES[link.kind] ?? link.kind} of L${c.layer} H${c.head} (composition ${link.score.toFixed(3)})`,
        text: linkLine(link),
      });
      b.addEventListener("click", () => intents.selectHead(link.layer, link.head));
      return b;
    }),
  );
}

/**
 * The token tab's partners (first in the pane) and the edge tab's answer.
 * @param {{tokenPane: HTMLElement, edgePane: HTMLElement}} dom
 */
function buildParts(dom) {
  const query = el("div", { className: "hs-why-query", dataset: { testid: "headsne-attribution-query" } });
  const partners = el("div", { className: "hs-related-list", dataset: { testid: "headsne-attribution-partners" } });
  const pinnedBox = el("div", { className: "hs-why-pinned", dataset: { testid: "headsne-token-partners" } }, [
    query,
    partners,
  ]);
  dom.tokenPane.prepend(pinnedBox);
  const note = el("div", { className: "hs-why-note", dataset: { testid: "headsne-attribution-note" } });
  const pairs = el("ol", { className: "hs-why-pairs", dataset: { testid: "headsne-attribution-pairs" } });
  const result = el("div", { className: "hs-why-result", dataset: { testid: "headsne-attribution-result" } }, [
    note,
    pairs,
  ]);
  const panel = el("div", { className: "hs-why", dataset: { testid: "headsne-attribution" } }, [
    el("div", { className: "hs-pane-title", text: "why the head attends: the edge's score in component pairs" }),
    result,
  ]);
  dom.edgePane.append(panel);
  return { query, partners, pinnedBox, note, pairs, result, panel };
}

/**
 * @param {{dom: {tokenPane: HTMLElement, edgePane: HTMLElement, headMapPanel: HTMLElement},
 *   store: import("../../store/store.js").Store<State>, intents: import("../../store/intents.js").Intents}} ctx
 */
export function createAttribution({ dom, store, intents }) {
  const scope = disposer();
  let pinned = -1;
  const { query, partners, pinnedBox, note, pairs, result, panel } = buildParts(dom);

  const ask = el("button", {
    className: "hs-related",
    text: "which earlier heads feed it?",
    title: "the composition links of the selected head (computed once per text, about 2 s on MiniLM)",
    dataset: { testid: "headsne-composition-ask" },
  });
  const links = el("div", { className: "hs-related-list", dataset: { testid: "headsne-composition" } }, [ask]);
  dom.headMapPanel.append(links);
  scope.listen(ask, "click", () => intents.askComposition());

  function showPartners() {
    const s = store.state;
    const tokens = s.doc.tokens;
    partners.replaceChildren();
    if (pinned < 0 || pinned >= tokens.length) {
      query.textContent = s.doc.word
        ? "click a point in the map: its occurrence, in its sentence"
        : "click a point in the map: its partners, and what wrote its state";
      return;
    }
    if (s.doc.word) {
      // word mode: the occurrence in its own sentence (no attention between the texts)
      const { head: line, context } = occurrenceParts(s.doc, pinned);
      query.replaceChildren(line, context);
      return;
    }
    const { layer, head } = headOf(s);
    const to = partnersAt(s, pinned).to;
    query.textContent = to.length
      ? `query ${tokenName(tokens, pinned)} attends in L${layer} H${head} to:`
      : `query ${tokenName(tokens, pinned)}: no attention edges in this mode (attention mode only)`;
    partners.dataset.i = String(pinned);
    partners.replaceChildren(
      ...to.map(({ token, weight }) => {
        const b = el("button", {
          className: "hs-related hs-why-partner",
          dataset: { i: String(pinned), j: String(token) },
          title: `why ${tokenName(tokens, pinned)} attends to ${tokenName(tokens, token)} in L${layer} H${head}`,
          text: `${tokenName(tokens, token)} ${weight.toFixed(2)}`,
        });
        b.addEventListener("click", () => intents.askAttribution(layer, head, pinned, token));
        return b;
      }),
    );
  }

  function showAnswer() {
    const a = store.state.attribution ?? null;
    note.textContent = attributionNote(a, store.state.doc.tokens);
    result.dataset.state = a?.state ?? "";
    for (const key of ["layer", "head", "i", "j"]) result.dataset[key] = a ? String(a[key]) : "";
    const shown = a?.state === "done" ? /** @type {Pair[]} */ (a.pairs ?? []) : [];
    pairs.replaceChildren(
      ...shown.map((p) =>
        el("li", {
          className: "hs-why-pair",
          dataset: { query: p.query, key: p.key, score: String(p.score) },
          text: pairLine(p),
        }),
      ),
    );
  }

  const showLinks = () => fillLinks({ links, ask }, store.state, intents);

  scope.add(
    store.on("pin", (/** @type {number} */ token) => {
      pinned = token;
      showPartners();
    }),
  );
  scope.add(store.watch(["edges", "layer", "head", "mode", "edge_k", "doc", "rows"], showPartners));
  scope.add(store.watch(["attribution", "doc"], showAnswer));
  // word mode: no attention between the occurrences (each is in a text of its own)
  scope.add(
    store.watch(["doc"], (s) => {
      panel.hidden = links.hidden = Boolean(s.doc.word);
      pinned = -1;
      showPartners();
    }),
  );
  scope.add(store.watch(["composition", "layer", "head"], showLinks));
  return {
    destroy: () => {
      scope.dispose();
      panel.remove();
      pinnedBox.remove();
      links.remove();
    },
  };
}
