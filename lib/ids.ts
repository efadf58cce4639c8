import { randomBytes } from "node:crypto";

/** Every public id carries a type prefix (`ord_`, `qt_`, `evt_`, `rdr_`, `drv_`, `ptn_`). */
export type IdPrefix = "ord" | "evt" | "rdr" | "drv" | "ptn" | "att" | "key";

const ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyz";

/**
 * A random opaque id: prefix + 20 base36 characters (~103 bits), so ids are
 * unguessable and another partner's id cannot be enumerated.
 */
export function newId(prefix: IdPrefix): string {
	const bytes = randomBytes(20);
	let out = "";
	for (const b of bytes) out += ALPHABET[b % 36];
	return `${prefix}_${out}`;
}

export function hasPrefix(id: unknown, prefix: IdPrefix | "qt"): id is string {
	return typeof id === "string" && id.startsWith(`${prefix}_`);
}
