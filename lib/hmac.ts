import { hash } from "node:crypto";

/**
 * HMAC-SHA256 (RFC 2104) from two one-shot `crypto.hash` calls on keys padded
 * once. `createHmac` builds a stream object (LazyTransform, a native handle,
 * the key checks) per call: with two quote signatures per fare estimate that
 * was the largest item of pricing's profile. The result is byte for byte
 * `createHmac("sha256", key).update(data).digest()` (unit-tested against it).
 */

const BLOCK_BYTES = 64;
const IPAD = 0x36;
const OPAD = 0x5c;

export class HmacSha256Key {
	/** key ⊕ ipad, followed by room the message is copied into. */
	private readonly inner: Buffer;
	/** key ⊕ opad ‖ inner digest (32 bytes). */
	private readonly outer: Buffer;

	constructor(key: Uint8Array | string) {
		let k = typeof key === "string" ? Buffer.from(key, "utf8") : Buffer.from(key);
		// Keys longer than a block are hashed first (RFC 2104 §2).
		if (k.length > BLOCK_BYTES) k = hash("sha256", k, "buffer");
		this.inner = Buffer.alloc(BLOCK_BYTES + 256);
		this.outer = Buffer.alloc(BLOCK_BYTES + 32);
		for (let i = 0; i < BLOCK_BYTES; i++) {
			const b = i < k.length ? k[i] : 0;
			this.inner[i] = b ^ IPAD;
			this.outer[i] = b ^ OPAD;
		}
	}

	/** The 32-byte MAC of `data`. Not re-entrant across awaits: it is synchronous, so it need not be. */
	sign(data: Uint8Array): Buffer {
		let innerInput: Buffer;
		if (data.length <= this.inner.length - BLOCK_BYTES) {
			this.inner.set(data, BLOCK_BYTES);
			innerInput = this.inner.subarray(0, BLOCK_BYTES + data.length);
		} else {
			innerInput = Buffer.concat([this.inner.subarray(0, BLOCK_BYTES), data]);
		}
		this.outer.set(hash("sha256", innerInput, "buffer"), BLOCK_BYTES);
		return hash("sha256", this.outer, "buffer");
	}
}
