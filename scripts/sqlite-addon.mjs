// Run by `npm install` after patch-package (package.json's postinstall). On
// Node 24.19 and later, better-sqlite3's addon must be compiled from the
// patched sources: patches/better-sqlite3+12.11.1.patch replaces Node's
// node::ObjectWrap, whose cleanup hooks abort the process when V8 collects a
// statement outside any context (nodejs/node#65446). npm built the addon, or
// fetched a prebuilt one, before the patch was applied, so it is built again
// here. Whether the addon holds the patch is read from the addon itself (the
// patched class's name is in its symbols), not from file times: an addon
// rebuilt or fetched later is newer than the patch and may still lack it.
// On Node 20 and 22, whose ObjectWrap has no hooks, nothing is done.
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import console from "node:console";
import process from "node:process";
import { fileURLToPath, URL } from "node:url";

const [major, minor] = process.versions.node.split(".").map(Number);
if (major > 24 || (major === 24 && minor >= 19)) {
  const dir = fileURLToPath(new URL("../node_modules/better-sqlite3/", import.meta.url));
  let patched = false;
  try {
    patched = readFileSync(`${dir}build/Release/better_sqlite3.node`).includes("ObjectWrapWithoutCleanupHooks");
  } catch {
    // No addon yet: built below.
  }
  if (!patched) {
    console.log(`better-sqlite3: compiling the patched addon for Node ${process.versions.node}`);
    execFileSync("npm", ["run", "build-release"], { cwd: dir, stdio: "inherit" });
  }
}
