// eslint (flat config) for the front end: recommended rules, browser + node globals for js/.
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
    },
  },
];
