// ESM mode (jose and oidc-provider are ESM-only): run with
// NODE_OPTIONS=--experimental-vm-modules, TypeScript compiled by @swc/jest.
export default {
  testEnvironment: "node",
  extensionsToTreatAsEsm: [".ts"],
  testMatch: ["<rootDir>/test/**/*.test.ts"],
  moduleNameMapper: { "^(\\.{1,2}/.*)\\.js$": "$1" },
  transform: {
    "^.+\\.ts$": [
      "@swc/jest",
      {
        jsc: { parser: { syntax: "typescript" }, target: "es2022" },
        module: { type: "es6" },
        sourceMaps: "inline",
      },
    ],
  },
  // A safety net, not a measure: on a loaded 2-core machine (load average
  // 30, another make test beside this one) a suite's CLI processes and
  // servers start twenty times slower than on an idle one, and a test that
  // starts two of them and waits for runs took minutes. A hang costs five
  // minutes instead of one and a half; a slow machine no longer fails.
  testTimeout: 300000,
  // How long a worker may take to exit once its files are done before jest
  // kills it and warns that a test leaked. On that loaded machine a
  // worker with nothing left open (no handle after its last file) was seen
  // to die 0.6-0.7 s after its exit began, past jest's default of 0.5 s:
  // Node's own shutdown of a large heap and of its threads.
  workerGracefulExitTimeout: 5000,
  // The PostgreSQL server of the run (test/support/postgres.ts).
  globalSetup: "<rootDir>/test/support/global-setup.ts",
  globalTeardown: "<rootDir>/test/support/global-teardown.ts",
};
