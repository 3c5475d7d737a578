// The source of P a mode names (the generated table of headsne_widget/affinity/sources): what the views ask of a
// mode instead of comparing its name.
import { SOURCES } from "./protocol.generated.js";

/** @typedef {import("./protocol.generated.js").Source} Source */

/**
 * The source of `mode`; attention's for a mode this page does not know (a newer kernel's).
 * @param {string | undefined} mode
 * @returns {Source}
 */
export function sourceOf(mode) {
  return (mode && SOURCES[mode]) || SOURCES.attention;
}

/** The modes in the mode control's order. */
export const MODE_NAMES = Object.keys(SOURCES);
