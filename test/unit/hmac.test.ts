import { createHmac, randomBytes } from "node:crypto";
import { HmacSha256Key } from "../../lib/hmac";

describe("HmacSha256Key", () => {
	it("equals createHmac for keys shorter than, equal to and longer than a block, and for messages on either side of every padding boundary", () => {
		for (const keyLength of [1, 16, 32, 63, 64, 65, 100, 200]) {
			const secret = randomBytes(keyLength);
			const key = new HmacSha256Key(secret);
			for (const length of [0, 1, 55, 56, 63, 64, 65, 85, 119, 120, 128, 255, 256, 257, 1000]) {
				const data = randomBytes(length);
				expect(key.sign(data).equals(createHmac("sha256", secret).update(data).digest())).toBe(true);
			}
		}
	});

	it("takes a string key as UTF-8, and one key signs many messages without carrying anything from one to the next", () => {
		const key = new HmacSha256Key("sécret-κλειδί");
		const long = randomBytes(300);
		const short = Buffer.from("abc");
		expect(key.sign(long).equals(createHmac("sha256", "sécret-κλειδί").update(long).digest())).toBe(true);
		expect(key.sign(short).equals(createHmac("sha256", "sécret-κλειδί").update(short).digest())).toBe(true);
		expect(key.sign(short.subarray(0, 2)).equals(createHmac("sha256", "sécret-κλειδί").update("ab").digest())).toBe(true);
	});

	it("different keys give different MACs for one message", () => {
		const data = Buffer.from("same message");
		expect(new HmacSha256Key("a").sign(data).equals(new HmacSha256Key("b").sign(data))).toBe(false);
	});
});

describe("HmacSha256Key against the RFC 4231 test vectors", () => {
	it("case 1 (20-byte key) and case 6 (131-byte key, hashed first)", () => {
		expect(new HmacSha256Key(Buffer.alloc(20, 0x0b)).sign(Buffer.from("Hi There")).toString("hex")).toBe("b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
		expect(new HmacSha256Key(Buffer.alloc(131, 0xaa)).sign(Buffer.from("Test Using Larger Than Block-Size Key - Hash Key First")).toString("hex")).toBe(
			"60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54",
		);
	});
});
