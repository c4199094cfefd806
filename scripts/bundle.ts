// The shipped `agentplane` binary: tsc's output (dist/src) bundled by esbuild
// into dist/bin, one entry per process or thread that starts from a file (the
// CLI, the runtime thread, the SQLite writer thread), their shared code split
// into chunks beside them. Node 20's ES module loader spends about half a
// millisecond on each file it resolves and loads, and the service's graph is
// some 900 files: bundled, `tenant create` costs half the CPU and `serve` is
// ready in about half the time, each thread included.
//
// Flat output: serve.ts and writer.ts find their thread's entry beside
// themselves (`new URL("./worker-thread.js", import.meta.url)`), which holds
// in dist/bin as in dist/src. better-sqlite3 stays a package: it loads its
// native addon by a path relative to itself.
//
// What a bundle changes, for whoever adds code: a dynamically imported
// CommonJS package gives only `default` (so cli/tracing.ts reads its
// exports from there), and a package that finds its own files by
// `__dirname` (pino's transports, which src/log.ts does not use) finds none.
import { rmSync } from "node:fs";
import { build } from "esbuild";

// Chunk names are content hashes: the last build's would stay beside the new.
rmSync("dist/bin", { recursive: true, force: true });
await build({
  entryPoints: {
    agentplane: "dist/src/cli/main.js",
    "worker-thread": "dist/src/cli/worker-thread.js",
    "writer-thread": "dist/src/store/sqlite/writer-thread.js",
  },
  outdir: "dist/bin",
  chunkNames: "chunk-[hash]",
  bundle: true,
  splitting: true,
  format: "esm",
  platform: "node",
  target: "node20",
  external: ["better-sqlite3", "esbuild"],
  // Packages written as CommonJS call require(), which an ES module lacks.
  banner: { js: "import { createRequire as agentplaneCreateRequire } from 'node:module'; const require = agentplaneCreateRequire(import.meta.url);" },
  sourcemap: "linked",
  logLevel: "warning",
});
