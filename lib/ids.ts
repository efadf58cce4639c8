import { randomFillSync } from "node:crypto";

/** Every public id carries a type prefix (`ord_`, `qt_`, `evt_`, `rdr_`, `drv_`, `ptn_`). */
export type IdPrefix = "ord" | "evt" | "rdr" | "drv" | "ptn" | "att" | "key";

const ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyz";
/** The largest multiple of 36 in a byte: bytes at or above it are skipped, so every character is equally likely. */
const UNBIASED_BELOW = 252;

/**
 * Random bytes drawn from the CSPRNG 4 KiB at a time: one `randomFillSync`
 * per ~200 ids instead of an allocation and a call per id (1.8% of the
 * create-order profile). Each byte is used once.
 */
const pool = Buffer.allocUnsafe(4096);
let next = pool.length;

function randomByte(): number {
	if (next === pool.length) {
		randomFillSync(pool);
		next = 0;
	}
	return pool[next++];
}

/**
 * A random opaque id: prefix + 20 base36 characters (~103 bits), so ids are
 * unguessable and another partner's id cannot be enumerated.
 */
export function newId(prefix: IdPrefix): string {
	let out = "";
	while (out.length < 20) {
		const b = randomByte();
		if (b < UNBIASED_BELOW) out += ALPHABET[b % 36];
	}
	return `${prefix}_${out}`;
}

export function hasPrefix(id: unknown, prefix: IdPrefix | "qt"): id is string {
	return typeof id === "string" && id.startsWith(`${prefix}_`);
}
