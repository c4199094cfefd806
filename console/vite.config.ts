import { fileURLToPath } from "node:url";
import { defineConfig } from "vite";

// Built by `make build` into dist/console, which the server serves at
// /console (src/surfaces/console/console.ts). Asset names carry a content hash, so
// the server may cache them for a year.
export default defineConfig({
  root: fileURLToPath(new URL(".", import.meta.url)),
  base: "/console/",
  oxc: { jsx: { runtime: "automatic" } },
  build: {
    outDir: fileURLToPath(new URL("../dist/console", import.meta.url)),
    emptyOutDir: true,
    // Every browser that runs ES modules supports modulepreload natively
    // enough; the polyfill would only add bytes.
    modulePreload: { polyfill: false },
    reportCompressedSize: true,
  },
});
