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
  // 15, another make test beside this one) a suite's CLI processes and
  // servers start several times slower than on an idle one.
  testTimeout: 90000,
  // The PostgreSQL server of the run (test/support/postgres.ts).
  globalSetup: "<rootDir>/test/support/global-setup.ts",
  globalTeardown: "<rootDir>/test/support/global-teardown.ts",
};
