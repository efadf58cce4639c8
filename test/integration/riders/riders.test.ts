import type { Client } from "pg";
import { rejection as expectError } from "../../helpers/broker";
import type { TestNode } from "../../helpers/node";
import { startTestbed, type Testbed } from "../../helpers/testbed";
import { createPartner } from "../../helpers/webhooks";
import type { Rider } from "../../../contracts/riders";

/** riders on a real broker and the server PostgreSQL (real concurrency). */

let bed: Testbed;
let node: TestNode;
let pg: Client;
let partnerA: string;
let partnerB: string;

const upsert = (params: Record<string, unknown>) => node.broker.call<Rider, Record<string, unknown>>("riders.upsert", params);

beforeAll(async () => {
	bed = await startTestbed("riders", { services: ["partners", "pricing", "riders"], env: { QUOTE_SIGNING_SECRET: `riders-it-${"z".repeat(40)}` } });
	({ node, pg } = bed);
	partnerA = (await createPartner(node.broker, "A")).partnerId;
	partnerB = (await createPartner(node.broker, "B")).partnerId;
});

afterAll(async () => {
	await bed?.stop();
});

describe("riders.upsert", () => {
	it("creates a rider, then updates the same (partner, phone)", async () => {
		const first = await upsert({ partnerId: partnerA, name: "  Asha Rao ", phone: "+919812345678", email: "asha@Example.COM" });
		expect(first).toEqual({
			riderId: expect.stringMatching(/^rdr_[0-9a-z]{20}$/),
			partnerId: partnerA,
			mode: "live",
			name: "Asha Rao",
			phone: "+919812345678",
			email: "asha@example.com",
			createdAt: expect.any(String),
			updatedAt: expect.any(String),
		});
		const second = await upsert({ partnerId: partnerA, name: "Asha R.", phone: "+919812345678" });
		expect(second.riderId).toBe(first.riderId);
		expect(second.name).toBe("Asha R.");
		expect(second.email).toBe("asha@example.com"); // an omitted email keeps the stored one
		expect(second.createdAt).toBe(first.createdAt);
		const third = await upsert({ partnerId: partnerA, name: "Asha R.", phone: "+919812345678", email: "asha@new.example" });
		expect(third.email).toBe("asha@new.example");
	});

	it("keeps modes apart: a test upsert of a live rider's phone makes its own rider and leaves the live one as it was", async () => {
		const phone = "+919812340001";
		const live = await upsert({ partnerId: partnerA, mode: "live", name: "Live Rider", phone, email: "live@example.com" });
		const test = await upsert({ partnerId: partnerA, mode: "test", name: "Load Test", phone, email: "load@example.com" });
		expect(test.riderId).not.toBe(live.riderId);
		expect(test.mode).toBe("test");
		expect(await node.broker.call("riders.get", { riderId: live.riderId })).toEqual(live);
		// Without a mode (a caller from before modes): the live row.
		expect((await upsert({ partnerId: partnerA, name: "Live Rider", phone })).riderId).toBe(live.riderId);
		await expectError(upsert({ partnerId: partnerA, mode: "staging", name: "X", phone }), "VALIDATION_ERROR");
	});

	it("keeps partners apart: one phone, two partners, two riders", async () => {
		const a = await upsert({ partnerId: partnerA, name: "Ravi", phone: "+14155550100" });
		const b = await upsert({ partnerId: partnerB, name: "Ravi", phone: "+14155550100" });
		expect(a.riderId).not.toBe(b.riderId);
		await expectError(node.broker.call("riders.get", { riderId: a.riderId, partnerId: partnerB }), "NOT_FOUND");
		expect(await node.broker.call("riders.get", { riderId: a.riderId, partnerId: partnerA })).toEqual(a);
		expect(await node.broker.call("riders.get", { riderId: b.riderId })).toEqual(b);
		await expectError(node.broker.call("riders.get", { riderId: "rdr_unknown" }), "NOT_FOUND");
	});

	it("makes exactly one row from 20 simultaneous upserts of one phone", async () => {
		const phone = "+447700900123";
		const results = await Promise.all(
			Array.from({ length: 20 }, (_, i) => upsert({ partnerId: partnerA, name: `Caller ${i}`, phone, email: `c${i}@example.com` })),
		);
		const ids = new Set(results.map((r) => r.riderId));
		expect(ids.size).toBe(1);
		const { rows } = await pg.query<{ id: string; name: string }>("SELECT id, name FROM riders WHERE partner_id = $1 AND phone = $2", [partnerA, phone]);
		expect(rows).toHaveLength(1);
		expect(rows[0].id).toBe([...ids][0]);
		// The last writer wins, and it is one of the callers.
		expect(results.map((r) => r.name)).toContain(rows[0].name);
	});

	it("concurrent upserts share statements (issue 9) yet each caller gets its own partner's rider", async () => {
		const phones = Array.from({ length: 30 }, (_, i) => `+9199000${String(i).padStart(5, "0")}`);
		const calls = phones.flatMap((phone, i) => [
			{ partnerId: partnerA, name: `A ${i}`, phone },
			{ partnerId: partnerB, name: `B ${i}`, phone },
			{ partnerId: partnerA, name: `A again ${i}`, phone, email: `a${i}@example.com` },
		]);
		const results = await Promise.all(calls.map((c) => upsert(c)));
		results.forEach((r, n) => {
			expect(r.partnerId).toBe(calls[n].partnerId);
			expect(r.phone).toBe(calls[n].phone);
			expect(r.name).toBe(calls[n].name);
		});
		for (let i = 0; i < phones.length; i++) {
			const [a, b, again] = results.slice(i * 3, i * 3 + 3);
			expect(again.riderId).toBe(a.riderId);
			expect(b.riderId).not.toBe(a.riderId);
		}
		const { rows } = await pg.query<{ partner_id: string; n: number }>(
			"SELECT partner_id, count(*)::int AS n FROM riders WHERE phone = ANY($1::text[]) GROUP BY partner_id ORDER BY partner_id",
			[phones],
		);
		expect(rows.map((r) => r.n)).toEqual([30, 30]);
		// The second call for a phone of A (the later one) wins: its email is stored.
		const stored = await pg.query<{ email: string }>("SELECT email FROM riders WHERE partner_id = $1 AND phone = $2", [partnerA, phones[7]]);
		expect(stored.rows[0].email).toBe("a7@example.com");
	});

	it("refuses bad fields with VALIDATION_ERROR and writes nothing", async () => {
		const before = (await pg.query<{ n: number }>("SELECT count(*)::int AS n FROM riders")).rows[0].n;
		const base = { partnerId: partnerA, name: "Meera", phone: "+919800000001" };
		for (const phone of ["9812345678", "+0912345678", "+91 98123 45678", "+12345", "+1234567890123456", ""]) {
			const err = await expectError(upsert({ ...base, phone }), "VALIDATION_ERROR");
			expect(JSON.stringify(err.data)).toContain("phone");
		}
		await expectError(upsert({ ...base, name: "" }), "VALIDATION_ERROR");
		await expectError(upsert({ ...base, name: "   " }), "VALIDATION_ERROR");
		await expectError(upsert({ ...base, name: "x".repeat(201) }), "VALIDATION_ERROR");
		await expectError(upsert({ ...base, email: "not-an-email" }), "VALIDATION_ERROR");
		await expectError(upsert({ ...base, email: 5 }), "VALIDATION_ERROR");
		await expectError(upsert({ name: "Meera", phone: "+919800000001" }), "VALIDATION_ERROR");
		expect((await pg.query<{ n: number }>("SELECT count(*)::int AS n FROM riders")).rows[0].n).toBe(before);
	});
});
