import js from "@eslint/js";
import tseslint from "typescript-eslint";

export default tseslint.config(
  { ignores: ["dist/", "gen/", "node_modules/", "data/", "clients/typescript/dist/", "clients/typescript/src/gen"] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  // The guide's example programs are plain Node ESM, run as they are shown.
  { files: ["docs/**/*.mjs"], languageOptions: { globals: { process: "readonly", console: "readonly", URL: "readonly" } } },
  {
    rules: {
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_", ignoreRestSiblings: true }],
      "@typescript-eslint/consistent-type-imports": "error",
    },
  },
);
