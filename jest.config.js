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
  testTimeout: 30000,
  // The PostgreSQL server of the run (test/support/postgres.ts).
  globalSetup: "<rootDir>/test/support/global-setup.ts",
  globalTeardown: "<rootDir>/test/support/global-teardown.ts",
};
