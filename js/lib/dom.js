// Small DOM helpers: elements are built with textContent only (token text is never parsed as HTML).

/**
 * An element with properties (`text` = textContent, `dataset` = data-*, known properties set directly,
 * anything else as an attribute) and children.
 * @param {string} tag
 * @param {Record<string, any>} [props]
 * @param {(Node | string)[]} [children]
 * @returns {any}
 */
export function el(tag, props = {}, children = []) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props)) {
    if (key === "dataset") Object.assign(node.dataset, value);
    else if (key === "text") node.textContent = value;
    else if (key in node) /** @type {any} */ (node)[key] = value;
    else node.setAttribute(key, value);
  }
  for (const child of children) node.append(child);
  return node;
}

/**
 * A button with text, a data-testid and a title (its tooltip and, without other text, its name).
 * @param {string} text
 * @param {string} testid
 * @param {string} title
 * @param {Record<string, any>} [props]
 */
export function button(text, testid, title, props = {}) {
  return el("button", { text, title, dataset: { testid }, ...props });
}

/**
 * A div with a class and an optional data-testid.
 * @param {string} className
 * @param {string} [testid]
 */
export function div(className, testid = undefined) {
  return el("div", testid ? { className, dataset: { testid } } : { className });
}

/**
 * A span with a class and text.
 * @param {string} className
 * @param {string} text
 */
export function span(className, text) {
  return el("span", className ? { className, text } : { text });
}

/**
 * Keys pressed inside the widget stay in the widget: JupyterLab's command shortcuts (arrows move
 * between cells, A/B/D/M edit the notebook) listen on the document and must not see them.
 * @param {HTMLElement} root
 */
export function keepKeys(root) {
  const stop = (/** @type {Event} */ event) => event.stopPropagation();
  root.addEventListener("keydown", stop);
  root.addEventListener("keyup", stop);
  root.addEventListener("keypress", stop);
  return () => {
    root.removeEventListener("keydown", stop);
    root.removeEventListener("keyup", stop);
    root.removeEventListener("keypress", stop);
  };
}

/**
 * What a view must undo when it goes: listeners, subscriptions, timers. `listen` adds a DOM listener and
 * remembers to remove it; `add` remembers any undo function; `dispose` runs them all, newest first.
 */
export function disposer() {
  /** @type {(() => void)[]} */
  const undo = [];
  return {
    /** @param {() => void} fn */
    add(fn) {
      undo.push(fn);
    },
    /**
     * @param {EventTarget} target
     * @param {string} type
     * @param {(event: any) => void} fn
     * @param {AddEventListenerOptions} [options]
     */
    listen(target, type, fn, options) {
      target.addEventListener(type, fn, options);
      undo.push(() => target.removeEventListener(type, fn, options));
    },
    dispose() {
      for (const fn of undo.splice(0).reverse()) fn();
    },
  };
}
