// When to run things: once per batch of trait changes, and at most so often.

/** `fn` wrapped to run once, a microtask later, however often it is called meanwhile. */
export function coalesce(fn) {
  let queued = false;
  return () => {
    if (queued) return;
    queued = true;
    queueMicrotask(() => {
      queued = false;
      fn();
    });
  };
}

/**
 * `fn` run at most once every `ms` milliseconds: a request inside the window runs it once at the
 * window's end (so the last state always goes out). Returns {request(), cancel()}.
 */
export function throttle(fn, ms) {
  let timer = 0;
  let last = -Infinity;
  const run = () => {
    timer = 0;
    last = performance.now();
    fn();
  };
  return {
    request() {
      if (timer) return;
      const wait = ms - (performance.now() - last);
      if (wait <= 0) run();
      else timer = setTimeout(run, wait);
    },
    cancel() {
      clearTimeout(timer);
      timer = 0;
    },
  };
}
