// Preloaded (`node --import`) by the Node 24 suite into the service it runs
// under Node 24, and inherited by its worker threads: `better-sqlite3`
// resolves to the copy `make node24` built for Node 24's ABI in dist/node24,
// so node_modules keeps the Node 20 build the rest of the suite loads.
import { registerHooks } from "node:module";
import { URL } from "node:url";

const copy = new URL("../../dist/node24/node_modules/better-sqlite3/lib/index.js", import.meta.url).href;

registerHooks({
  resolve: (specifier, context, nextResolve) => nextResolve(specifier === "better-sqlite3" ? copy : specifier, context),
});
