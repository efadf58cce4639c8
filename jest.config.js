/** @type {import('jest').Config} */
module.exports = {
	testEnvironment: "node",
	roots: ["<rootDir>/test"],
	testMatch: ["**/*.test.ts"],
	transform: { "^.+\\.ts$": ["ts-jest", { isolatedModules: true }] },
	testTimeout: 60000,
	// Autovacuum on for the run where the server allows it, put back after.
	globalSetup: "<rootDir>/test/global-setup.ts",
	globalTeardown: "<rootDir>/test/global-teardown.ts",
	// Integration suites start brokers, HTTP servers and child processes; give them room to stop.
	forceExit: false,
};
