/** @type {import('jest').Config} */
module.exports = {
  testEnvironment: "node",
  roots: ["<rootDir>/test"],
  testMatch: ["**/*.test.ts"],
  transform: { "^.+\\.ts$": ["ts-jest", { isolatedModules: true }] },
  testTimeout: 60000,
  // Integration suites start brokers, HTTP servers and child processes; give them room to stop.
  forceExit: false,
};
