import { createHmac, randomBytes } from "node:crypto";
import { HmacSha256Key } from "../../lib/hmac";

describe("HmacSha256Key", () => {
	it("equals createHmac for keys shorter than, equal to and longer than a block, and for every message length up to past its buffer", () => {
		for (const keyLength of [1, 16, 32, 63, 64, 65, 100, 200]) {
			const secret = randomBytes(keyLength);
			const key = new HmacSha256Key(secret);
			for (const length of [0, 1, 55, 56, 64, 85, 255, 256, 257, 1000]) {
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
