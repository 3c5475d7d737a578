// eslint (flat config) for the front end: recommended rules, browser + node globals for js/, and limits
// that keep the views small controllers (js/views/views.js): short, simple functions (under 150 lines, blank
// lines and comments counted) with few parameters (pass an options object), and modules of at most 300 lines.
import js from "@eslint/js";
import globals from "globals";

export default [
  { ignores: ["headsne_widget/static/**", "node_modules/**", "test-artifacts/**", ".venv/**"] },
  js.configs.recommended,
  {
    files: ["js/**/*.js", "eslint.config.js"],
    languageOptions: {
      ecmaVersion: 2022,
      sourceType: "module",
      globals: { ...globals.browser, ...globals.node },
    },
    rules: {
      "no-unused-vars": ["error", { argsIgnorePattern: "^_" }],
      eqeqeq: ["error", "smart"],
      "no-var": "error",
      "prefer-const": "error",
      "max-lines-per-function": ["error", { max: 149 }],
      complexity: ["error", 15],
      "max-depth": ["error", 4],
      "max-params": ["error", 5],
      "max-nested-callbacks": ["error", 4],
      "max-lines": ["error", { max: 300 }],
    },
  },
  // generated from headsne_widget/widget/protocol.py and the P sources: its size is the protocol's, not a module's
  { files: ["js/model/protocol.generated.js"], rules: { "max-lines": "off" } },
];
