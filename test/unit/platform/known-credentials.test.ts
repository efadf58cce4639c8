import { createHash, randomBytes } from "node:crypto";
import { KnownCredentials, PrefixSet, prefixOf, readKnownCredentialsSettings, type KnownCredentialsSource } from "../../../lib/known-credentials";

const digest = () => createHash("sha256").update(randomBytes(32)).digest("hex");
const silent = { info: () => undefined, warn: jest.fn() };

/** A table of live credentials in memory (the repo's part), counting its reads. */
function source(initial: string[] = []) {
	const rows = initial.map((hash, i) => ({ id: `id_${String(i).padStart(8, "0")}`, hash, createdAt: new Date(0) }));
	const src = {
		rows,
		pages: 0,
		since: 0,
		livePage: jest.fn(async (after: string | null, limit: number) => {
			src.pages++;
			return rows
				.filter((r) => after === null || r.id > after)
				.slice(0, limit)
				.map((r) => ({ id: r.id, prefix: r.hash.slice(0, 16) }));
		}),
		createdSince: jest.fn(async (since: Date) => {
			src.since++;
			return rows.filter((r) => r.createdAt >= since).map((r) => r.hash.slice(0, 16));
		}),
		now: async () => new Date(),
		insert(hash: string) {
			rows.push({ id: `id_${String(rows.length).padStart(8, "0")}`, hash, createdAt: new Date() });
		},
	};
	return src as typeof src & KnownCredentialsSource;
}

function known(src: KnownCredentialsSource, max = 1000) {
	return new KnownCredentials({ source: src, max, refreshMs: 0, reloadMs: 0, what: "keys", log: silent });
}

describe("PrefixSet", () => {
	it("holds what was added, nothing else, and grows at half full", () => {
		const set = new PrefixSet();
		const added = Array.from({ length: 5000 }, () => prefixOf(digest()));
		for (const [hi, lo] of added) set.add(hi, lo);
		expect(set.size).toBe(5000);
		for (const [hi, lo] of added) expect(set.has(hi, lo)).toBe(true);
		const others = Array.from({ length: 5000 }, () => prefixOf(digest()));
		expect(others.filter(([hi, lo]) => set.has(hi, lo))).toEqual([]);
		// 8 bytes a slot, between a quarter and half full: 16 to 32 bytes a credential.
		expect(set.bytes).toBeLessThanOrEqual(5000 * 32);
		expect(set.bytes).toBeGreaterThanOrEqual(5000 * 16);
		expect(set.add(...added[0])).toBe(false);
		// Zero is a value like any other.
		expect(set.has(0, 0)).toBe(false);
		set.add(0, 0);
		expect(set.has(0, 0)).toBe(true);
	});
});

describe("KnownCredentials", () => {
	it("answers 'may be live' for everything until loaded, then only for live prefixes", async () => {
		const live = [digest(), digest()];
		const src = source(live);
		const k = known(src);
		expect(k.mayBeLive(digest())).toBe(true);
		await k.start();
		expect(k.ready).toBe(true);
		expect(live.map((d) => k.mayBeLive(d))).toEqual([true, true]);
		expect(k.mayBeLive(digest())).toBe(false);
		k.stop();
	});

	it("pages a full read by id", async () => {
		const src = source(Array.from({ length: 12_345 }, digest));
		const k = known(src, 100_000);
		await k.start();
		expect(k.size).toBe(12_345);
		expect(src.pages).toBe(3);
		expect(src.rows.every((r) => k.mayBeLive(r.hash))).toBe(true);
		k.stop();
	});

	it("adds its own creations at once, and others' on refresh", async () => {
		const src = source([]);
		const k = known(src);
		await k.start();
		const mine = digest();
		k.add(mine);
		expect(k.mayBeLive(mine)).toBe(true);
		const theirs = digest();
		src.insert(theirs);
		expect(k.mayBeLive(theirs)).toBe(false);
		await k.refresh();
		expect(k.mayBeLive(theirs)).toBe(true);
		k.stop();
	});

	it("drops revoked credentials on reload", async () => {
		const gone = digest();
		const src = source([gone]);
		const k = known(src);
		await k.start();
		src.rows.splice(0, 1);
		await k.reload();
		expect(k.mayBeLive(gone)).toBe(false);
		k.stop();
	});

	it("past max it knows it is incomplete and answers 'may be live' for everything (lookups, never refusals)", async () => {
		const src = source(Array.from({ length: 20 }, digest));
		const k = known(src, 10);
		await k.start();
		expect(k.ready).toBe(false);
		expect(k.mayBeLive(digest())).toBe(true);
		expect(k.size).toBeLessThanOrEqual(10);
		// Fits again after revocations: complete again.
		src.rows.splice(0, 15);
		await k.reload();
		expect(k.ready).toBe(true);
		expect(k.mayBeLive(digest())).toBe(false);
		// Growing past max by creations: incomplete again.
		for (let i = 0; i < 6; i++) k.add(digest());
		expect(k.ready).toBe(false);
		k.stop();
	});

	it("a failed read keeps what it had and says so", async () => {
		const live = digest();
		const src = source([live]);
		const k = known(src);
		await k.start();
		src.createdSince.mockRejectedValueOnce(Object.assign(new Error("connection refused"), { name: "ConnectionRefusedError" }));
		await k.refresh();
		expect(k.mayBeLive(live)).toBe(true);
		expect(silent.warn).toHaveBeenCalledWith("Could not read the live keys: ConnectionRefusedError");
		k.stop();
	});

	it("coalesces reads asked for while one of the same kind waits", async () => {
		const src = source([digest()]);
		const k = known(src);
		await k.start();
		await Promise.all([k.refresh(), k.refresh(), k.refresh()]);
		expect(src.since).toBeLessThanOrEqual(2);
		k.stop();
	});

	it("reads its settings", () => {
		expect(readKnownCredentialsSettings({})).toEqual({ max: 1_000_000, refreshMs: 10_000, reloadMs: 3_600_000 });
		expect(readKnownCredentialsSettings({ KNOWN_CREDENTIALS_MAX: "5", KNOWN_CREDENTIALS_REFRESH_MS: "0" })).toMatchObject({ max: 5, refreshMs: 0 });
		expect(() => readKnownCredentialsSettings({ KNOWN_CREDENTIALS_MAX: "0" })).toThrow(/KNOWN_CREDENTIALS_MAX/);
	});
});
