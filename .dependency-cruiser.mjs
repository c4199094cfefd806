// The layering of docs/architecture.md, checked by `make check`
// (`depcruise`): dependencies point inward only, and nothing imports in a
// cycle. Paths are matched from the repository root.
const OUTER = "^src/(app|cli/|config)";

export default {
  forbidden: [
    {
      name: "no-cycle",
      comment: "A cycle ties modules that should load and change apart (type-only imports count too).",
      severity: "error",
      from: {},
      to: { circular: true },
    },
    {
      name: "composition-root",
      comment: "Only the composition root (src/app.ts, src/cli/) knows the configuration, the app and the CLI; src/config.ts itself reads the layers' defaults.",
      severity: "error",
      from: { path: "^src/", pathNot: ["^src/cli/", "^src/app\\.ts$", "^src/config\\.ts$"] },
      to: { path: OUTER },
    },
    {
      name: "app-only-from-cli",
      severity: "error",
      from: { path: "^src/", pathNot: "^src/cli/" },
      to: { path: "^src/(app\\.ts$|cli/)" },
    },
    {
      name: "surfaces-over-service",
      comment: "A surface translates requests for the service: it knows neither SQL nor the runtime.",
      severity: "error",
      from: { path: "^src/surfaces/" },
      to: { path: "^src/(store|runtime)/" },
    },
    {
      name: "service-knows-no-http",
      comment: "Nothing in service/ knows HTTP, a surface or the runtime.",
      severity: "error",
      from: { path: "^src/service/" },
      to: { path: ["^src/(surfaces|runtime)/", "^node_modules/(fastify|@fastify)/"] },
    },
    {
      name: "runtime-beside-surfaces",
      severity: "error",
      from: { path: "^src/runtime/" },
      to: { path: "^src/surfaces/" },
    },
    {
      name: "store-innermost",
      comment: "The store engines know only their contract and lib/.",
      severity: "error",
      from: { path: "^src/store/" },
      to: { path: "^src/(surfaces|service|runtime|integrations)/" },
    },
    {
      name: "integrations-inward",
      comment: "Identity providers, MCP and model clients, the outbound guard and the sandbox serve the layers above them.",
      severity: "error",
      from: { path: "^src/integrations/" },
      to: { path: "^src/(surfaces|service|runtime|store)/" },
    },
    {
      name: "lib-is-a-leaf",
      comment: "lib/ holds small pieces every layer may use; it uses none of them.",
      severity: "error",
      from: { path: "^src/lib/" },
      to: { path: "^src/", pathNot: "^src/lib/" },
    },
    {
      name: "console-apart",
      comment: "The browser console calls the API through gen/ only.",
      severity: "error",
      from: { path: "^console/" },
      to: { path: "^src/" },
    },
  ],
  options: {
    doNotFollow: { path: "node_modules" },
    exclude: { path: "^(dist|node_modules)/" },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: "tsconfig.json" },
    enhancedResolveOptions: { extensions: [".ts", ".tsx", ".js"] },
  },
};
