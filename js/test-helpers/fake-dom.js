// A DOM for the node wiring tests (js/widget.test.js): jsdom, plus what jsdom leaves out and the widget
// needs (a 2D canvas context that records nothing, ResizeObserver, matchMedia). No requestAnimationFrame:
// the widget schedules through the clock it is given (js/test-helpers/testing.js fakeClock), never the page's timers.
// The drawing itself is tested in the browser (tests/ui); here only the wiring between DOM and model.

import { JSDOM } from "jsdom";

/** Install a fresh jsdom window as the global DOM; returns it. */
export function installDom() {
  const dom = new JSDOM("<!doctype html><html><body></body></html>", { pretendToBeVisual: true });
  const { window } = dom;
  const context = new Proxy(
    {},
    {
      get(target, name) {
        if (name in target) return target[name];
        if (name === "measureText") return (text) => ({ width: 6 * String(text).length });
        if (name === "getImageData" || name === "createImageData") {
          return (w, h) => ({ width: w, height: h, data: new Uint8ClampedArray(4 * w * h) });
        }
        return () => undefined;
      },
      set(target, name, value) {
        target[name] = value;
        return true;
      },
    },
  );
  window.HTMLCanvasElement.prototype.getContext = () => context;
  window.HTMLCanvasElement.prototype.toBlob = (callback) => callback(new window.Blob(["png"]));
  window.ResizeObserver = class {
    observe() {}
    disconnect() {}
  };
  window.matchMedia = () => ({ matches: false, addEventListener() {}, removeEventListener() {} });
  for (const name of [
    "window",
    "document",
    "HTMLElement",
    "HTMLCanvasElement",
    "Node",
    "MouseEvent",
    "KeyboardEvent",
    "WheelEvent",
    "Event",
    "ResizeObserver",
    "MutationObserver",
    "getComputedStyle",
    "matchMedia",
    "navigator",
    "XMLSerializer",
    "DOMParser",
  ]) {
    Object.defineProperty(globalThis, name, { value: window[name], configurable: true, writable: true });
  }
  return window;
}

/**
 * A fake anywidget model (lonboard's pattern): traits in a plain object, every set / save_changes / send
 * recorded in `calls`, `emit(name)` fires the change handlers as the real model does when Python writes.
 * @param {Record<string, any>} traits
 */
export function fakeModel(traits) {
  /** @type {Map<string, Set<Function>>} */
  const handlers = new Map();
  /** @type {any[][]} */
  const calls = [];
  const each = (events, fn) => events.split(/\s+/).filter(Boolean).forEach(fn);
  return {
    calls,
    traits,
    get: (name) => traits[name],
    set(name, value) {
      calls.push(["set", name, value]);
      traits[name] = value;
    },
    save_changes: () => calls.push(["save_changes"]),
    send: (message) => calls.push(["send", message]),
    on(events, fn) {
      each(events, (event) => {
        if (!handlers.has(event)) handlers.set(event, new Set());
        handlers.get(event).add(fn);
      });
    },
    off(events, fn) {
      each(events, (event) => handlers.get(event)?.delete(fn));
    },
    /** Python changed `values`: store them and fire their change handlers. */
    emit(values) {
      Object.assign(traits, values);
      for (const name of Object.keys(values)) for (const fn of handlers.get(`change:${name}`) ?? []) fn();
    },
    listenerCount: () => [...handlers.values()].reduce((sum, set) => sum + set.size, 0),
  };
}
