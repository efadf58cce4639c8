import { readBusUser, readNatsOptions, type ReadFile } from "../../../lib/nats-settings";
import { Transporters } from "moleculer";
import runnerConfig, { buildBrokerConfig } from "../../../moleculer.config";
import { CoalescingNatsTransporter } from "../../../lib/coalescing-nats-transporter";

/** Files as a Secret mount would give them. */
const files: Record<string, string> = {
	"/run/secrets/nats-password": "file-password\n",
	"/run/secrets/nats-user": "ride\n",
	"/run/secrets/empty": "  \n",
	"/run/secrets/ca.pem": "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n",
	"/run/secrets/cert.pem": "-----BEGIN CERTIFICATE-----\nMIIC\n-----END CERTIFICATE-----\n",
	"/run/secrets/key.pem": "-----BEGIN PRIVATE KEY-----\nsecret-key-material\n-----END PRIVATE KEY-----\n",
	"/run/secrets/bad.creds": "not a creds file",
};
const readFile: ReadFile = (path) => {
	if (!(path in files)) throw Object.assign(new Error(`ENOENT: ${path}`), { code: "ENOENT" });
	return files[path];
};
const read = (env: Record<string, string>) => readNatsOptions(env, readFile);

describe("NATS login settings (lib/nats-settings.ts)", () => {
	test("nothing set: no options (the machine's NATS without auth, local development)", () => {
		expect(read({})).toBeUndefined();
		expect(read({ NATS_USER: " ", NATS_TOKEN: "" })).toBeUndefined();
	});

	test("user and password, from the environment or mounted files, become an authenticator; nothing secret is serialisable", () => {
		const envs: Record<string, string>[] = [
			{ NATS_USER: "ride", NATS_PASSWORD: "env-password" },
			{ NATS_USER_FILE: "/run/secrets/nats-user", NATS_PASSWORD_FILE: "/run/secrets/nats-password" },
		];
		for (const env of envs) {
			const options = read(env)!;
			expect(typeof options.authenticator).toBe("function");
			const auth = options.authenticator!() as { user: string; pass: string };
			expect(auth.user).toBe("ride");
			expect(auth.pass).toBe(env.NATS_PASSWORD ?? "file-password");
			expect(JSON.stringify(options)).not.toMatch(/password/);
		}
		expect((read({ NATS_TOKEN: "tok-123" })!.authenticator!() as { auth_token: string }).auth_token).toBe("tok-123");
	});

	test("partial or contradictory configurations refuse to start, naming the setting, never the secret", () => {
		const cases: [Record<string, string>, RegExp][] = [
			[{ NATS_USER: "ride" }, /^NATS_PASSWORD must be set/],
			[{ NATS_PASSWORD: "sekrit-1" }, /^NATS_USER must be set/],
			[
				{ NATS_USER: "ride", NATS_PASSWORD: "sekrit-1", NATS_PASSWORD_FILE: "/run/secrets/nats-password" },
				/^NATS_PASSWORD_FILE must be unset when NATS_PASSWORD is set/,
			],
			[{ NATS_USER: "ride", NATS_PASSWORD: "sekrit-1", NATS_TOKEN: "sekrit-2" }, /^NATS_TOKEN must be unset when NATS_USER is set/],
			[{ NATS_USER: "ride", NATS_PASSWORD_FILE: "/run/secrets/missing" }, /^NATS_PASSWORD_FILE must be a readable file \(ENOENT\)/],
			[{ NATS_TOKEN_FILE: "/run/secrets/empty" }, /^NATS_TOKEN_FILE must be a file that is not empty/],
			[{ NATS_CREDS_FILE: "/run/secrets/bad.creds" }, /^NATS_CREDS_FILE must be a NATS creds file/],
			[{ NATS_NKEY_SEED: "sekrit-nkey" }, /^NATS_NKEY_SEED must be a user nkey seed/],
			[{ NATS_TLS_CERT: "/run/secrets/cert.pem" }, /^NATS_TLS_KEY must be set when NATS_TLS_CERT is set/],
			[{ NATS_TLS_KEY: "/run/secrets/key.pem" }, /^NATS_TLS_CERT must be set when NATS_TLS_KEY is set/],
			[{ NATS_TLS: "maybe" }, /^NATS_TLS must be one of true\/false/],
		];
		for (const [env, message] of cases) {
			let error: Error | undefined;
			try {
				read(env);
			} catch (err) {
				error = err as Error;
			}
			expect([env, error?.name, error?.message]).toEqual([env, "SettingError", expect.stringMatching(message)]);
			expect(error!.message).not.toMatch(/sekrit/);
		}
	});

	test("TLS: files by path (the client reads them), on with NATS_TLS=true or any file", () => {
		expect(read({ NATS_TLS: "true" })).toEqual({ tls: {} });
		const options = read({
			NATS_TLS_CA: "/run/secrets/ca.pem",
			NATS_TLS_CERT: "/run/secrets/cert.pem",
			NATS_TLS_KEY: "/run/secrets/key.pem",
			NATS_USER: "ride",
			NATS_PASSWORD: "p",
		})!;
		expect(options.tls).toEqual({ caFile: "/run/secrets/ca.pem", certFile: "/run/secrets/cert.pem", keyFile: "/run/secrets/key.pem" });
		expect(JSON.stringify(options)).not.toContain("secret-key-material");
	});

	test("the broker config passes them to the NATS transporter, and only with a TRANSPORTER", () => {
		const cfg = buildBrokerConfig({ TRANSPORTER: "nats://nats:4222", NATS_USER: "ride", NATS_PASSWORD: "p", METRICS_PORT: "0" });
		// Moleculer's NATS transporter (lib/coalescing-nats-transporter.ts extends it), with the URL and login.
		expect(cfg.transporter).toBeInstanceOf(Transporters.NATS);
		expect(cfg.transporter).toBeInstanceOf(CoalescingNatsTransporter);
		const opts = (cfg.transporter as InstanceType<typeof Transporters.NATS>).opts as { url: string; authenticator: unknown };
		expect(opts.url).toBe("nats://nats:4222");
		expect(typeof opts.authenticator).toBe("function");
		expect(buildBrokerConfig({ NATS_USER: "ride", METRICS_PORT: "0" }).transporter).toBeNull();
		expect(() => buildBrokerConfig({ TRANSPORTER: "nats://nats:4222", NATS_USER: "ride", METRICS_PORT: "0" })).toThrow(/NATS_PASSWORD/);
	});
});

it("gives moleculer-runner a function: importing moleculer.config.ts builds no config and no transporter", () => {
	const saved = process.env.TRANSPORTER;
	process.env.TRANSPORTER = "nats://127.0.0.1:4222";
	try {
		expect(typeof runnerConfig).toBe("function");
		// Built only when the runner calls it, from the environment of that moment.
		expect(runnerConfig().transporter).toBeInstanceOf(CoalescingNatsTransporter);
	} finally {
		if (saved === undefined) delete process.env.TRANSPORTER;
		else process.env.TRANSPORTER = saved;
	}
});

describe("readBusUser", () => {
	it("is the NATS user (from the setting or its file), one subject token, or undefined", () => {
		expect(readBusUser({})).toBeUndefined();
		expect(readBusUser({ NATS_USER: "orders" })).toBe("orders");
		expect(readBusUser({ NATS_USER_FILE: "/run/u" }, () => "gateway\n")).toBe("gateway");
		expect(() => readBusUser({ NATS_USER: "orders.evil" })).toThrow(/NATS_USER/);
		expect(() => readBusUser({ NATS_USER: "a>b" })).toThrow(/NATS_USER/);
	});
});
