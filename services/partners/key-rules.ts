import { randomBytes } from "node:crypto";
import { KEY_MODES, keyPrefix, LEGACY_KEY_PREFIX, legacyKeyPrefix, type KeyMode } from "../../contracts/partners";
import { validationError } from "../../lib/errors";

/**
 * Which API key a create (`partners.create`) or a rotation
 * (`partners.createKey`) gets: one rule for both, so an operator-supplied
 * `--api-key` is held to what a generated key is. Length and characters are
 * checked by the actions' params (API_KEY_RULE); uniqueness by the unique
 * index on api_keys.key_hash (CONFLICT). Pure apart from the random bytes.
 */

/** A new key of that mode: `ride_test_…` / `ride_live_…` + 256 random bits. */
export function newModeKey(mode: KeyMode): string {
	return `${keyPrefix(mode)}${randomBytes(32).toString("base64url")}`;
}

/** Why a supplied key may not be a key of `mode`, or undefined when it may. */
export function givenKeyProblem(mode: KeyMode, given: string): string | undefined {
	// `ride_live_…` (or an old `rk_live_…`) must never be a test key, nor the reverse.
	const other = KEY_MODES.find((m) => m !== mode && (given.startsWith(keyPrefix(m)) || given.startsWith(legacyKeyPrefix(m))));
	if (other) return `apiKey starts with ${given.startsWith(keyPrefix(other)) ? keyPrefix(other) : legacyKeyPrefix(other)} but mode is ${mode}`;
	if (given.startsWith(LEGACY_KEY_PREFIX)) {
		return `apiKey must not start with ${LEGACY_KEY_PREFIX} (Stripe's restricted-key prefix): use ${keyPrefix(mode)} or no prefix`;
	}
	return undefined;
}

/** The key of a create/createKey call: the given one when it passes givenKeyProblem (else 400 VALIDATION_ERROR), or a generated one. */
export function keyFor(mode: KeyMode, given: string | undefined): string {
	if (given === undefined) return newModeKey(mode);
	const problem = givenKeyProblem(mode, given);
	if (problem) throw validationError("apiKey", problem);
	return given;
}
