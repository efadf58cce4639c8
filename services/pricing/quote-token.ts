import { createHash, createHmac, createSecretKey, timingSafeEqual, type KeyObject } from "node:crypto";
import { haversineMeters, isValidPoint } from "../../lib/geo";
import { type Point, SERVICE_TYPES, type ServiceType } from "../../contracts/common";
import type { QuotedFare } from "./fare";
import { QUOTE_MATCH_RADIUS_METRES } from "../../contracts/constants";
import type { KeyMode } from "../../contracts/partners";

/**
 * Quote ids are self-contained signed tokens, so fare-estimate writes nothing.
 *
 * About 90 characters:
 *
 *   qt_<base64url(payload ‖ mac)>
 *
 * payload (binary, ~50 bytes) = 0x02 (the format's byte), kid (4 bytes: the
 * first bytes of SHA-256 of the secret, so every instance with the same
 * secret agrees without coordination), service type, pickup and drop as int32 of 1e-5
 * degrees (≈ 1 m), then varints: distance, duration, expiry (whole Unix
 * seconds), total, base, distance, time fare, surge tenths, tax (paise), then
 * the 3-letter currency. Format 3 (0x03) is format 2 with one more varint
 * after the tax: the pickup time of a scheduled ride (whole Unix seconds);
 * a quote without one is written as format 2, exactly as before, and both
 * formats verify. mac = the first 16 bytes (128 bits) of
 * HMAC-SHA256(secret, "qt2" ‖ payload ‖ partnerId ‖ mode). The partner and
 * the key mode are bound by the MAC but not carried: a token verifies only
 * for the partner and mode that asked for it, and for anyone else it reads
 * exactly like garbage. The base64url text must be canonical (one spelling
 * per token).
 *
 * A quote belongs to the partner and the key mode that asked for it: a test
 * quote is QUOTE_INVALID for a live key and the reverse.
 */

export interface QuoteClaims {
	partnerId: string;
	/** The mode of the key that asked for the quote. */
	mode: KeyMode;
	serviceType: ServiceType;
	/** Rounded to 5 decimals (≈ 1 m). */
	pickup: Point;
	drop: Point;
	distance: number;
	duration: number;
	fare: QuotedFare;
	/** Unix milliseconds. */
	expiresAt: number;
	/** A scheduled ride's pickup time, whole Unix seconds (format 3); absent = a ride now (format 2). */
	pickupAtSeconds?: number;
}

export const QUOTE_PREFIX = "qt_";
const COORD_DECIMALS = 5;

export function keyIdOf(secret: string): string {
	return createHash("sha256").update(secret, "utf8").digest("hex").slice(0, 8);
}

/**
 * The current signing secret plus older ones still accepted while quotes
 * they signed may be alive (rotation: move the old secret to the previous
 * list for at least one quote TTL). Each secret is made a KeyObject once, so
 * a signature does not copy the secret again.
 */
export class QuoteKeyring {
	readonly currentKid: string;
	/** The current kid's 4 bytes, as written into every payload. */
	readonly currentKidBytes: Buffer;
	private readonly keys = new Map<string, KeyObject>();

	constructor(current: string, previous: readonly string[] = []) {
		if (!current) throw new Error("A quote signing secret is required");
		this.currentKid = keyIdOf(current);
		this.currentKidBytes = Buffer.from(this.currentKid, "hex");
		for (const s of previous) this.keys.set(keyIdOf(s), createSecretKey(Buffer.from(s, "utf8")));
		this.keys.set(this.currentKid, createSecretKey(Buffer.from(current, "utf8")));
	}

	/** HMAC-SHA256 of `data` with the secret of `kid`, or undefined for a kid this keyring does not hold. */
	mac(kid: string, data: Uint8Array): Buffer | undefined {
		const key = this.keys.get(kid);
		return key ? createHmac("sha256", key).update(data).digest() : undefined;
	}
}

const FORMAT_NOW = 0x02;
const FORMAT_SCHEDULED = 0x03;
const MAC_BYTES = 16;
const MAC_DOMAIN = Buffer.from("qt2", "ascii");
const COORD_SCALE = 10 ** COORD_DECIMALS;
const MODE_BYTE: Record<KeyMode, number> = { test: 0x74, live: 0x6c };
const TOKEN_SHAPE = /^qt_([A-Za-z0-9_-]{60,400})$/;

/** Writes `n` as a varint at `at`; returns the offset after it. */
function writeVarint(buf: Buffer, at: number, n: number): number {
	let v = n;
	while (v >= 0x80) {
		buf[at++] = (v % 0x80) | 0x80;
		v = Math.floor(v / 0x80);
	}
	buf[at++] = v;
	return at;
}

/**
 * Where a token's MAC input is assembled: "qt2" ‖ payload ‖ partner
 * (length-prefixed) ‖ mode. Used synchronously only, so one per process
 * serves every call; a partner id too long for it gets a buffer of its own.
 */
const SCRATCH_BYTES = 512;
const PAYLOAD_MAX_BYTES = 1 + 4 + 1 + 16 + 10 * 8 + 3;
const scratch = Buffer.alloc(SCRATCH_BYTES);
MAC_DOMAIN.copy(scratch, 0);

function macBuffer(partnerId: string, payloadBytes: number): Buffer {
	const needed = MAC_DOMAIN.length + payloadBytes + 8 + Buffer.byteLength(partnerId, "utf8") + 1 + MAC_BYTES;
	if (needed <= SCRATCH_BYTES) return scratch;
	const own = Buffer.alloc(needed);
	MAC_DOMAIN.copy(own, 0);
	return own;
}

/** After the payload in `buf` (which ends at `at`): the partner, length-prefixed, and the mode byte. Returns the end. */
function writeMacTail(buf: Buffer, at: number, partnerId: string, mode: KeyMode): number {
	const partnerBytes = Buffer.byteLength(partnerId, "utf8");
	at = writeVarint(buf, at, partnerBytes);
	at += buf.write(partnerId, at, "utf8");
	buf[at++] = MODE_BYTE[mode];
	return at;
}

const isCurrency = (c: string): boolean => c.length === 3 && /^[A-Z]{3}$/.test(c);

/** `mode` defaults to test. Expiry is kept in whole seconds (rounded down: never longer than asked). */
export function encodeQuote(claims: Omit<QuoteClaims, "mode"> & { mode?: KeyMode }, keyring: QuoteKeyring): string {
	const f = claims.fare;
	const typeIndex = (SERVICE_TYPES as readonly string[]).indexOf(claims.serviceType);
	if (typeIndex < 0) throw new Error(`Unknown service type ${claims.serviceType}`);
	if (!isCurrency(f.currency)) throw new Error(`Currency ${f.currency} is not a 3-letter code`);
	const buf = macBuffer(claims.partnerId, PAYLOAD_MAX_BYTES);
	const start = MAC_DOMAIN.length;
	let at = start;
	const scheduled = claims.pickupAtSeconds !== undefined;
	buf[at++] = scheduled ? FORMAT_SCHEDULED : FORMAT_NOW;
	at += keyring.currentKidBytes.copy(buf, at);
	buf[at++] = typeIndex;
	at = buf.writeInt32BE(Math.round(claims.pickup.lat * COORD_SCALE), at);
	at = buf.writeInt32BE(Math.round(claims.pickup.lng * COORD_SCALE), at);
	at = buf.writeInt32BE(Math.round(claims.drop.lat * COORD_SCALE), at);
	at = buf.writeInt32BE(Math.round(claims.drop.lng * COORD_SCALE), at);
	const numbers = [
		claims.distance,
		claims.duration,
		Math.floor(claims.expiresAt / 1000),
		f.total,
		f.baseFare,
		f.distanceFare,
		f.timeFare,
		f.surgeTenths,
		f.tax,
		...(scheduled ? [claims.pickupAtSeconds!] : []),
	];
	for (const n of numbers) {
		if (!nonNegInt(n)) throw new Error("Quote numbers must be non-negative integers");
		at = writeVarint(buf, at, n);
	}
	at += buf.write(f.currency, at, "ascii");
	const payloadEnd = at;
	const macEnd = writeMacTail(buf, payloadEnd, claims.partnerId, claims.mode ?? "test");
	const mac = keyring.mac(keyring.currentKid, buf.subarray(0, macEnd))!;
	// The token is payload ‖ the MAC's first 16 bytes: they go where the partner's bytes were.
	mac.copy(buf, payloadEnd, 0, MAC_BYTES);
	return QUOTE_PREFIX + buf.toString("base64url", start, payloadEnd + MAC_BYTES);
}

/** The claims of a payload (already authenticated), or undefined when it does not parse. */
function decodePayload(payload: Buffer, partnerId: string, mode: KeyMode): QuoteClaims | undefined {
	let at = 6;
	const int32 = (): number => {
		const v = payload.readInt32BE(at);
		at += 4;
		return v / COORD_SCALE;
	};
	const varint = (): number | undefined => {
		let n = 0;
		let scale = 1;
		for (let i = 0; i < 8 && at < payload.length; i++) {
			const b = payload[at++];
			n += (b & 0x7f) * scale;
			if (b < 0x80) return n;
			scale *= 0x80;
		}
		return undefined;
	};
	const serviceType = SERVICE_TYPES[payload[5]];
	if (serviceType === undefined || payload.length < at + 16) return undefined;
	const pickup = { lat: int32(), lng: int32() };
	const drop = { lat: int32(), lng: int32() };
	const nums: number[] = [];
	const scheduled = payload[0] === FORMAT_SCHEDULED;
	for (let i = 0; i < (scheduled ? 10 : 9); i++) {
		const n = varint();
		if (n === undefined || !nonNegInt(n)) return undefined;
		nums.push(n);
	}
	if (at + 3 !== payload.length) return undefined;
	const currency = payload.toString("ascii", at, at + 3);
	if (!isValidPoint(pickup) || !isValidPoint(drop) || !isCurrency(currency)) return undefined;
	const [distance, duration, expiresSec, total, baseFare, distanceFare, timeFare, surgeTenths, tax, pickupAtSeconds] = nums;
	return {
		partnerId,
		mode,
		serviceType,
		pickup,
		drop,
		distance,
		duration,
		fare: { currency, total, baseFare, distanceFare, timeFare, surgeTenths, tax },
		expiresAt: expiresSec * 1000,
		...(scheduled ? { pickupAtSeconds } : {}),
	};
}

/** Authenticates a token for this partner and mode: its claims, or undefined (forged, foreign, garbled). */
function checkToken(body: string, partnerId: string, mode: KeyMode, keyring: QuoteKeyring): QuoteClaims | undefined {
	const bytes = Buffer.from(body, "base64url");
	// One spelling per token: base64 ignores the last character's spare bits.
	if (bytes.length < 6 + 16 + 9 + 3 + MAC_BYTES || (bytes[0] !== FORMAT_NOW && bytes[0] !== FORMAT_SCHEDULED) || bytes.toString("base64url") !== body)
		return undefined;
	const payload = bytes.subarray(0, bytes.length - MAC_BYTES);
	const given = bytes.subarray(bytes.length - MAC_BYTES);
	const buf = macBuffer(partnerId, payload.length);
	payload.copy(buf, MAC_DOMAIN.length);
	const macEnd = writeMacTail(buf, MAC_DOMAIN.length + payload.length, partnerId, mode);
	const expected = keyring.mac(payload.toString("hex", 1, 5), buf.subarray(0, macEnd));
	if (!expected || !timingSafeEqual(given, expected.subarray(0, MAC_BYTES))) return undefined;
	return decodePayload(payload, partnerId, mode);
}

export type QuoteCheck = { ok: true; claims: QuoteClaims } | { ok: false; code: "QUOTE_INVALID" | "QUOTE_EXPIRED"; message: string; field?: string };

export interface QuoteExpectation {
	partnerId: string;
	/** The calling key's mode; `test` when omitted. */
	mode?: KeyMode;
	serviceType: string;
	pickup: Point;
	drop: Point;
	/** The booking's pickup time, whole Unix seconds; absent = a ride now. The quote must say the same. */
	pickupAtSeconds?: number;
}

const nonNegInt = (v: unknown): v is number => Number.isSafeInteger(v) && (v as number) >= 0;

/**
 * Verifies a quote id against what create-order asks for. Order matters:
 * signature, then ownership, then the trip, and only then expiry, so a forged
 * or foreign token never says "expired" (which would confirm it is real), and
 * a foreign partner's quote reads exactly like garbage.
 */
export function verifyQuote(
	token: unknown,
	expect: QuoteExpectation,
	keyring: QuoteKeyring,
	nowMs: number,
	matchRadiusMetres = QUOTE_MATCH_RADIUS_METRES,
): QuoteCheck {
	const invalid: QuoteCheck = { ok: false, code: "QUOTE_INVALID", message: "Quote is invalid", field: "quoteId" };
	if (typeof token !== "string") return invalid;
	const mode = expect.mode ?? "test";
	const shape = TOKEN_SHAPE.exec(token);
	// Another partner's quote, or one of the key's other mode, fails the MAC: it reads exactly like garbage.
	const claims = shape ? checkToken(shape[1], expect.partnerId, mode, keyring) : undefined;
	if (!claims) return invalid;

	if (claims.serviceType !== expect.serviceType) {
		return { ok: false, code: "QUOTE_INVALID", message: `Quote was made for serviceType "${claims.serviceType}"`, field: "serviceType" };
	}
	if (haversineMeters(claims.pickup, expect.pickup) > matchRadiusMetres) {
		return { ok: false, code: "QUOTE_INVALID", message: `pickup is more than ${matchRadiusMetres} m from the quoted pickup`, field: "pickup" };
	}
	if (haversineMeters(claims.drop, expect.drop) > matchRadiusMetres) {
		return { ok: false, code: "QUOTE_INVALID", message: `drop is more than ${matchRadiusMetres} m from the quoted drop`, field: "drop" };
	}
	if (claims.pickupAtSeconds !== expect.pickupAtSeconds) {
		const quoted = claims.pickupAtSeconds === undefined ? "a ride now" : `pickupAt ${new Date(claims.pickupAtSeconds * 1000).toISOString()}`;
		return { ok: false, code: "QUOTE_INVALID", message: `Quote was made for ${quoted}`, field: "pickupAt" };
	}
	if (nowMs >= claims.expiresAt) {
		return { ok: false, code: "QUOTE_EXPIRED", message: `Quote expired at ${new Date(claims.expiresAt).toISOString()}`, field: "quoteId" };
	}
	return { ok: true, claims };
}
