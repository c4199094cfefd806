// Run by `npm install` after patch-package (package.json's postinstall). On
// Node 24.19 and later, better-sqlite3's addon must be compiled from the
// patched sources: patches/better-sqlite3+12.11.1.patch replaces Node's
// node::ObjectWrap, whose cleanup hooks abort the process when V8 collects a
// statement outside any context (nodejs/node#65446). npm built the addon, or
// fetched a prebuilt one, before the patch was applied, so it is built again
// here; on Node 20 and 22, whose ObjectWrap has no hooks, nothing is done.
import { execFileSync } from "node:child_process";
import { statSync } from "node:fs";
import console from "node:console";
import process from "node:process";

const [major, minor] = process.versions.node.split(".").map(Number);
if (major > 24 || (major === 24 && minor >= 19)) {
  const dir = "node_modules/better-sqlite3";
  const addon = statSync(`${dir}/build/Release/better_sqlite3.node`, { throwIfNoEntry: false });
  if (!addon || addon.mtimeMs < statSync(`${dir}/src/util/object-wrap.hpp`).mtimeMs) {
    console.log("better-sqlite3: compiling the patched addon for Node " + process.versions.node);
    execFileSync("npm", ["run", "build-release"], { cwd: dir, stdio: "inherit" });
  }
}
