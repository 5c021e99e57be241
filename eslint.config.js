/* ESLint for the attention page's ES modules (src/transformer_attention/plotting/page/*.js): `npm ci && npm run
   lint`, run by .ci/run. Browser globals, const/let only, 250 lines a module at most, imports of the page's
   own modules only (html.py joins them into one script). */
import js from "@eslint/js";
import globals from "globals";

export default [
  js.configs.recommended,
  {
    files: ["src/**/*.js"],
    languageOptions: { ecmaVersion: 2022, sourceType: "module", globals: globals.browser },
    rules: {
      "no-var": "error",
      "prefer-const": "error",
      eqeqeq: "error",
      "max-lines": ["error", { max: 250 }],
      "no-restricted-syntax": ["error", { selector: "ImportDeclaration[source.value=/^(?!\\.\\/\\w+\\.js$)/]",
        message: "import only the page's own modules (\"./name.js\"): html.py joins them into one script" }],
    },
  },
];
