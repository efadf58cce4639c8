import { readFileSync } from "node:fs";
import { credsAuthenticator, nkeyAuthenticator, tokenAuthenticator, usernamePasswordAuthenticator, type Authenticator } from "nats";
import { envBool, SettingError, type Env } from "./settings";

/**
 * How this node logs in to NATS (the bus every service trusts): the
 * credentials and TLS files from the environment or from mounted secret files,
 * turned into the `nats` client's connect options (Moleculer's NATS
 * transporter hands its `options` to `nats.connect`).
 *
 * One login method at most:
 *   NATS_USER + NATS_PASSWORD          user and password
 *   NATS_TOKEN                         a token
 *   NATS_CREDS_FILE                    a creds file (JWT + nkey seed, decentralised auth)
 *   NATS_NKEY_SEED                     an nkey seed (the server knows the public key)
 * Each secret may instead be a mounted file: NATS_USER_FILE, NATS_PASSWORD_FILE,
 * NATS_TOKEN_FILE, NATS_NKEY_SEED_FILE (a Kubernetes/Compose secret).
 * TLS: NATS_TLS=true (server certificate checked against the system CAs),
 * NATS_TLS_CA (CA file), NATS_TLS_CERT + NATS_TLS_KEY (client certificate,
 * mutual TLS); any of the files turns TLS on.
 *
 * Same policy as every setting (lib/settings): unset means "not used"; a
 * partial or contradictory configuration, or an unreadable file, stops
 * start-up with a message naming the setting. Messages never carry a secret.
 *
 * Every login method becomes an `authenticator` function and TLS material is
 * passed as file paths: the broker's options are readable on the bus
 * (`$node.options`) and in the REPL, and JSON leaves functions out, so the
 * secrets never appear there or in a log line.
 */

export interface NatsConnectOptions {
	authenticator?: Authenticator;
	tls?: { caFile?: string; certFile?: string; keyFile?: string };
}

export type ReadFile = (path: string) => string;

const readText: ReadFile = (path) => readFileSync(path, "utf8");

function raw(env: Env, name: string): string | undefined {
	const v = env[name];
	return v === undefined || v.trim() === "" ? undefined : v.trim();
}

/** Reads a file named by a setting; the error names the setting and the path, never the content. */
function fileSetting(env: Env, name: string, readFile: ReadFile): string | undefined {
	const path = raw(env, name);
	if (path === undefined) return undefined;
	let text: string;
	try {
		text = readFile(path);
	} catch (err) {
		const code = (err as NodeJS.ErrnoException).code ?? "unreadable";
		throw new SettingError(name, `a readable file (${code})`, path);
	}
	if (text.trim() === "") throw new SettingError(name, "a file that is not empty", path);
	return text;
}

/** A secret given either as NAME or as a file NAME_FILE, not both. */
function secretSetting(env: Env, name: string, readFile: ReadFile): string | undefined {
	const direct = raw(env, name);
	const fromFile = raw(env, `${name}_FILE`);
	if (direct !== undefined && fromFile !== undefined) {
		throw new SettingError(`${name}_FILE`, `unset when ${name} is set (one source per secret)`, fromFile);
	}
	if (direct !== undefined) return direct;
	const text = fileSetting(env, `${name}_FILE`, readFile);
	return text === undefined ? undefined : text.trim();
}

/**
 * The bus user this node logs in as (NATS_USER or NATS_USER_FILE), or
 * undefined without one. It names the node (`<user>.<name>`) and selects
 * the permissions the transporter checks locally (lib/bus-permissions.ts).
 */
export function readBusUser(env: Env, readFile: ReadFile = readText): string | undefined {
	const user = secretSetting(env, "NATS_USER", readFile);
	if (user !== undefined && !/^[A-Za-z0-9_-]+$/.test(user)) throw new SettingError("NATS_USER", "one NATS subject token (letters, digits, - and _)", user);
	return user;
}

/** The connect options, or undefined when no NATS setting is given (the machine's NATS without auth: local development). */
export function readNatsOptions(env: Env, readFile: ReadFile = readText): NatsConnectOptions | undefined {
	const user = secretSetting(env, "NATS_USER", readFile);
	const password = secretSetting(env, "NATS_PASSWORD", readFile);
	const token = secretSetting(env, "NATS_TOKEN", readFile);
	const seed = secretSetting(env, "NATS_NKEY_SEED", readFile);
	const creds = fileSetting(env, "NATS_CREDS_FILE", readFile);

	if (user !== undefined && password === undefined) throw new SettingError("NATS_PASSWORD", "set (or NATS_PASSWORD_FILE) when NATS_USER is set", "");
	if (password !== undefined && user === undefined) throw new SettingError("NATS_USER", "set (or NATS_USER_FILE) when NATS_PASSWORD is set", "");

	const methods = [
		user !== undefined ? "NATS_USER" : undefined,
		token !== undefined ? "NATS_TOKEN" : undefined,
		creds !== undefined ? "NATS_CREDS_FILE" : undefined,
		seed !== undefined ? "NATS_NKEY_SEED" : undefined,
	].filter((m): m is string => m !== undefined);
	if (methods.length > 1) throw new SettingError(methods[1], `unset when ${methods[0]} is set (one NATS login method)`, "(set)");

	const options: NatsConnectOptions = {};
	if (user !== undefined) options.authenticator = usernamePasswordAuthenticator(user, password);
	if (token !== undefined) options.authenticator = tokenAuthenticator(token);
	if (creds !== undefined) {
		if (!/-----BEGIN NATS USER JWT-----/.test(creds) || !/-----BEGIN USER NKEY SEED-----/.test(creds)) {
			throw new SettingError("NATS_CREDS_FILE", "a NATS creds file (user JWT and nkey seed)", raw(env, "NATS_CREDS_FILE") ?? "");
		}
		options.authenticator = credsAuthenticator(new TextEncoder().encode(creds));
	}
	if (seed !== undefined) {
		if (!/^SU[A-Z2-7]{56}$/.test(seed))
			throw new SettingError(
				raw(env, "NATS_NKEY_SEED_FILE") ? "NATS_NKEY_SEED_FILE" : "NATS_NKEY_SEED",
				"a user nkey seed (SU…, 58 characters)",
				"(hidden)",
			);
		options.authenticator = nkeyAuthenticator(new TextEncoder().encode(seed));
	}

	const ca = fileSetting(env, "NATS_TLS_CA", readFile);
	const cert = fileSetting(env, "NATS_TLS_CERT", readFile);
	const key = fileSetting(env, "NATS_TLS_KEY", readFile);
	if (cert !== undefined && key === undefined) throw new SettingError("NATS_TLS_KEY", "set when NATS_TLS_CERT is set (client certificate and key)", "");
	if (key !== undefined && cert === undefined) throw new SettingError("NATS_TLS_CERT", "set when NATS_TLS_KEY is set (client certificate and key)", "");
	const tlsOn = envBool(env, "NATS_TLS", false) || ca !== undefined || cert !== undefined;
	// Read once above so a missing file stops start-up here; the client reads them again by path.
	if (tlsOn) {
		options.tls = {
			...(ca !== undefined ? { caFile: raw(env, "NATS_TLS_CA") } : {}),
			...(cert !== undefined ? { certFile: raw(env, "NATS_TLS_CERT"), keyFile: raw(env, "NATS_TLS_KEY") } : {}),
		};
	}

	return Object.keys(options).length > 0 ? options : undefined;
}
