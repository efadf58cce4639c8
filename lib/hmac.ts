import { hash } from "node:crypto";

/**
 * HMAC-SHA256 (RFC 2104) with the key's two padded blocks compressed once.
 *
 * Why not `createHmac`: it builds a stream object and a native handle per
 * call, and even two one-shot `crypto.hash` calls per MAC re-hash both 64-byte
 * key blocks every time; a fare estimate signs two quotes, and that was the
 * largest single item of pricing's profile. Here a MAC of a short message is
 * three SHA-256 compressions (the message's one or two blocks and the outer
 * block) from the key's saved midstates, in plain JavaScript with no
 * allocation but the result. The compression uses only additions, rotations
 * and fixed constants, so its running time does not depend on the key or the
 * data. The result is byte for byte `createHmac("sha256", key).update(data)
 * .digest()` (test/unit/hmac.test.ts checks it on random keys and messages).
 */

const BLOCK_BYTES = 64;

const K = new Int32Array([
	0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
	0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
	0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
	0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
	0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
]);
const IV = new Int32Array([0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19]);

/** The message schedule, reused by every compression (all of them synchronous). */
const W = new Int32Array(64);
/** The last block(s) of a message with its padding: at most two blocks. */
const TAIL = new Uint8Array(2 * BLOCK_BYTES);

/** One SHA-256 compression of the 64 bytes of `block` at `at` into `state`. */
function compress(state: Int32Array, block: Uint8Array, at: number): void {
	for (let i = 0; i < 16; i++, at += 4) W[i] = (block[at] << 24) | (block[at + 1] << 16) | (block[at + 2] << 8) | block[at + 3];
	for (let i = 16; i < 64; i++) {
		const w15 = W[i - 15];
		const w2 = W[i - 2];
		const s0 = ((w15 >>> 7) | (w15 << 25)) ^ ((w15 >>> 18) | (w15 << 14)) ^ (w15 >>> 3);
		const s1 = ((w2 >>> 17) | (w2 << 15)) ^ ((w2 >>> 19) | (w2 << 13)) ^ (w2 >>> 10);
		W[i] = (W[i - 16] + s0 + W[i - 7] + s1) | 0;
	}
	let a = state[0];
	let b = state[1];
	let c = state[2];
	let d = state[3];
	let e = state[4];
	let f = state[5];
	let g = state[6];
	let h = state[7];
	for (let i = 0; i < 64; i++) {
		const S1 = ((e >>> 6) | (e << 26)) ^ ((e >>> 11) | (e << 21)) ^ ((e >>> 25) | (e << 7));
		const ch = (e & f) ^ (~e & g);
		const t1 = (h + S1 + ch + K[i] + W[i]) | 0;
		const S0 = ((a >>> 2) | (a << 30)) ^ ((a >>> 13) | (a << 19)) ^ ((a >>> 22) | (a << 10));
		const maj = (a & b) ^ (a & c) ^ (b & c);
		const t2 = (S0 + maj) | 0;
		h = g;
		g = f;
		f = e;
		e = (d + t1) | 0;
		d = c;
		c = b;
		b = a;
		a = (t1 + t2) | 0;
	}
	state[0] = (state[0] + a) | 0;
	state[1] = (state[1] + b) | 0;
	state[2] = (state[2] + c) | 0;
	state[3] = (state[3] + d) | 0;
	state[4] = (state[4] + e) | 0;
	state[5] = (state[5] + f) | 0;
	state[6] = (state[6] + g) | 0;
	state[7] = (state[7] + h) | 0;
}

/** Hashes `data` onward from `state` (which has already absorbed `prefixBytes`, a whole number of blocks) and writes the 32-byte digest to `out`. */
function finish(state: Int32Array, prefixBytes: number, data: Uint8Array, out: Uint8Array): void {
	const whole = data.length - (data.length % BLOCK_BYTES);
	for (let at = 0; at < whole; at += BLOCK_BYTES) compress(state, data, at);
	const rest = data.length - whole;
	TAIL.fill(0);
	TAIL.set(data.subarray(whole), 0);
	TAIL[rest] = 0x80;
	const tailBlocks = rest + 1 + 8 > BLOCK_BYTES ? 2 : 1;
	// The message length in bits, big-endian, in the last 8 bytes (well below 2^53).
	const bits = (prefixBytes + data.length) * 8;
	const end = tailBlocks * BLOCK_BYTES;
	const high = Math.floor(bits / 0x1_0000_0000);
	TAIL[end - 8] = high >>> 24;
	TAIL[end - 7] = (high >>> 16) & 0xff;
	TAIL[end - 6] = (high >>> 8) & 0xff;
	TAIL[end - 5] = high & 0xff;
	TAIL[end - 4] = (bits >>> 24) & 0xff;
	TAIL[end - 3] = (bits >>> 16) & 0xff;
	TAIL[end - 2] = (bits >>> 8) & 0xff;
	TAIL[end - 1] = bits & 0xff;
	for (let i = 0; i < tailBlocks; i++) compress(state, TAIL, i * BLOCK_BYTES);
	for (let i = 0; i < 8; i++) {
		const v = state[i];
		out[i * 4] = v >>> 24;
		out[i * 4 + 1] = (v >>> 16) & 0xff;
		out[i * 4 + 2] = (v >>> 8) & 0xff;
		out[i * 4 + 3] = v & 0xff;
	}
}

export class HmacSha256Key {
	/** SHA-256 state after the block key ⊕ ipad. */
	private readonly innerMid = new Int32Array(8);
	/** SHA-256 state after the block key ⊕ opad. */
	private readonly outerMid = new Int32Array(8);

	constructor(key: Uint8Array | string) {
		let k: Uint8Array = typeof key === "string" ? Buffer.from(key, "utf8") : key;
		// Keys longer than a block are hashed first (RFC 2104 §2).
		if (k.length > BLOCK_BYTES) k = hash("sha256", k, "buffer");
		const inner = new Uint8Array(BLOCK_BYTES);
		const outer = new Uint8Array(BLOCK_BYTES);
		for (let i = 0; i < BLOCK_BYTES; i++) {
			const b = i < k.length ? k[i] : 0;
			inner[i] = b ^ 0x36;
			outer[i] = b ^ 0x5c;
		}
		this.innerMid.set(IV);
		compress(this.innerMid, inner, 0);
		this.outerMid.set(IV);
		compress(this.outerMid, outer, 0);
	}

	/** The 32-byte MAC of `data`. */
	sign(data: Uint8Array): Buffer {
		const state = new Int32Array(this.innerMid);
		const innerDigest = Buffer.allocUnsafe(32);
		finish(state, BLOCK_BYTES, data, innerDigest);
		state.set(this.outerMid);
		finish(state, BLOCK_BYTES, innerDigest, innerDigest);
		return innerDigest;
	}
}
