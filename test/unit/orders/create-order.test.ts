import type { WebhookUrlPolicy } from "../../../lib/webhook-url";
import type { Context } from "moleculer";
import { ORDER_EVENTS, type CreateOrderParams, type OrdersMeta } from "../../../contracts/orders";
import type { PricedTrip } from "../../../contracts/pricing";
import type { Rider } from "../../../contracts/riders";
import { ApiError } from "../../../lib/errors";
import { answerTemplate, createdEvent, createOrder, type CreateOrderDeps } from "../../../services/orders/create-order";
import { requestHash } from "../../../services/orders/idempotency";
import type { ClaimOutcome, IdempotencyClaim, IdempotencyRepo } from "../../../services/orders/idempotency.repo";
import { toOrder, type OrderRow } from "../../../services/orders/order-view";
import type { InsertOutcome, NewOrder, OrdersRepo, PartnerScope } from "../../../services/orders/orders.repo";
import { orderRowFixture } from "../../helpers/order-rows";

/**
 * The create-order use case (services/orders/create-order.ts) with fakes for
 * everything it is given: the two repos, the batched insert, the hint, and
 * a context whose `call` answers pricing and riders. No broker, no database.
 */

const PARTNER = "ptn_1";
const RIDER: Rider = {
	riderId: "rdr_7",
	partnerId: PARTNER,
	mode: "test",
	name: "Asha",
	phone: "+919800000001",
	email: null,
	createdAt: "2026-01-01T00:00:00.000Z",
	updatedAt: "2026-01-01T00:00:00.000Z",
};
const PRICED: PricedTrip = {
	serviceType: "cab",
	totalAmount: 182.5,
	totalAmountPaise: 18250,
	currency: "INR",
	fareBreakdown: { baseFare: 50 } as unknown as PricedTrip["fareBreakdown"],
	distance: 5234.4,
	duration: 959.6,
};

function params(overrides: Partial<CreateOrderParams> = {}): CreateOrderParams {
	return {
		user: { name: "Asha", phone: "+919800000001", email: "asha@example.com" },
		serviceType: "cab",
		pickup: { lat: 12.9716, lng: 77.5946, address: "MG Road" },
		drop: { lat: 12.9352, lng: 77.6245 },
		webhookURL: "https://partner.example.com/hooks",
		...overrides,
	};
}

/** The row the database would return for this insert. */
function rowOf(order: NewOrder): OrderRow {
	return orderRowFixture({
		id: order.id,
		partner_id: order.partnerId,
		mode: order.mode,
		rider_id: order.riderId,
		pickup: order.pickup as OrderRow["pickup"],
		drop: order.drop as OrderRow["drop"],
		fare_paise: order.farePaise,
		currency: order.currency,
		distance: order.distance,
		duration: order.duration,
		quote_id: order.quoteId,
		otp: order.otp,
		webhook_url: order.webhookURL,
		metadata: (order.metadata ?? null) as OrderRow["metadata"],
	});
}

type Answer = "row" | null;

interface Setup {
	/** What each insert answers in turn: the new row, or null (the rider has an active ride). */
	inserts?: Answer[];
	/** What each read of the rider's active ride answers in turn. */
	active?: Array<OrderRow | null>;
	claim?: ClaimOutcome;
	/** With a claim: the insert's claim was taken over. */
	claimLost?: boolean;
	/** Answers of the other services' actions (a function throws or answers). */
	call?: Partial<Record<string, (p: unknown) => unknown>>;
	/** The webhook URL policy (default: private targets allowed, any port). */
	webhookPolicy?: WebhookUrlPolicy;
}

function setup(s: Setup = {}) {
	const inserts = [...(s.inserts ?? ["row"])];
	const active = [...(s.active ?? [])];
	const log = {
		calls: [] as Array<[string, unknown]>,
		insertNew: [] as NewOrder[],
		insertOrder: [] as Array<{ order: NewOrder; claim: IdempotencyClaim | null; answer: unknown }>,
		findActive: [] as Array<[string, PartnerScope]>,
		claim: [] as unknown[][],
		finish: [] as Array<[IdempotencyClaim, number, unknown]>,
		release: [] as IdempotencyClaim[],
		hints: [] as Array<[string, unknown]>,
		inserted: [] as OrderRow[],
		warnings: [] as unknown[][],
	};
	const nextInsert = (order: NewOrder): OrderRow | null => {
		const answer = inserts.length > 1 ? inserts.shift()! : inserts[0];
		if (answer === null) return null;
		const row = rowOf(order);
		log.inserted.push(row);
		return row;
	};
	const orders = {
		async insertOrder(order: NewOrder, claim: IdempotencyClaim | null, answer?: unknown): Promise<InsertOutcome> {
			log.insertOrder.push({ order, claim, answer });
			if (s.claimLost) return { row: null, claimLost: true };
			return { row: nextInsert(order), claimLost: false };
		},
		async findActiveForRider(riderId: string, scope: PartnerScope): Promise<OrderRow | null> {
			log.findActive.push([riderId, scope]);
			return active.length > 1 ? active.shift()! : (active[0] ?? null);
		},
	};
	const keys = {
		async claim(...args: unknown[]): Promise<ClaimOutcome> {
			log.claim.push(args);
			if (!s.claim) throw new Error("claim was not expected");
			return s.claim;
		},
		async finish(claim: IdempotencyClaim, status: number, body: unknown): Promise<void> {
			log.finish.push([claim, status, body]);
		},
		async release(claim: IdempotencyClaim): Promise<void> {
			log.release.push(claim);
		},
	};
	const answers: Record<string, (p: unknown) => unknown> = {
		"pricing.quote": () => PRICED,
		"pricing.verifyQuote": (p) => ({ ...PRICED, quoteId: (p as { quoteId: string }).quoteId }),
		"riders.upsert": () => RIDER,
		...(s.call as Record<string, (p: unknown) => unknown>),
	};
	const deps: CreateOrderDeps = {
		orders: orders as unknown as OrdersRepo,
		keys: keys as unknown as IdempotencyRepo,
		webhookPolicy: s.webhookPolicy ?? { allowPrivate: true },
		logger: {
			warn: (...args: unknown[]) => void log.warnings.push(args),
			info: () => undefined,
			debug: () => undefined,
			error: () => undefined,
		} as unknown as CreateOrderDeps["logger"],
		async insertNew(order) {
			log.insertNew.push(order);
			return nextInsert(order);
		},
		hint: (event, payload) => void log.hints.push([event, payload]),
		schedule: { minLeadMs: 30 * 60_000, maxAheadMs: 7 * 86_400_000, dispatchLeadMs: 15 * 60_000 },
		scheduled: () => undefined,
	};
	const context = (p: CreateOrderParams, meta: OrdersMeta = {}) =>
		({
			params: p,
			meta: { partnerId: PARTNER, ...meta },
			async call(action: string, callParams: unknown) {
				log.calls.push([action, callParams]);
				const answer = answers[action];
				if (!answer) throw new Error(`unexpected call ${action}`);
				return answer(callParams);
			},
		}) as unknown as Context<CreateOrderParams, OrdersMeta>;
	return { deps, log, run: (p: CreateOrderParams = params(), meta?: OrdersMeta) => createOrder(deps, context(p, meta)) };
}

/** The error a promise rejects with. */
async function failure(promise: Promise<unknown>): Promise<ApiError> {
	return promise.then(
		() => {
			throw new Error("expected a rejection");
		},
		(err: unknown) => err as ApiError,
	);
}

const claim: IdempotencyClaim = { partnerId: PARTNER, mode: "test", key: "key-1", token: "tok-1" };

describe("createOrder: a new ride", () => {
	it("prices the trip, upserts the rider, inserts the order and answers 201 with it, hinting orders.created", async () => {
		const { log, run } = setup();
		const answer = await run();

		// Pricing first, with points only; the rider only once the request is known to be good.
		expect(log.calls).toEqual([
			["pricing.quote", { serviceType: "cab", pickup: { lat: 12.9716, lng: 77.5946 }, drop: { lat: 12.9352, lng: 77.6245 } }],
			["riders.upsert", { partnerId: PARTNER, mode: "test", name: "Asha", phone: "+919800000001", email: "asha@example.com" }],
		]);
		expect(log.insertNew).toHaveLength(1);
		const order = log.insertNew[0];
		expect(order).toMatchObject({
			partnerId: PARTNER,
			mode: "test",
			riderId: RIDER.riderId,
			serviceType: "cab",
			pickup: { lat: 12.9716, lng: 77.5946, address: "MG Road" },
			drop: { lat: 12.9352, lng: 77.6245 },
			farePaise: 18250,
			currency: "INR",
			fareBreakdown: PRICED.fareBreakdown,
			distance: 5234,
			duration: 960,
			quoteId: null,
			webhookURL: "https://partner.example.com/hooks",
		});
		expect(order.id).toMatch(/^ord_/);
		expect(order.otp).toMatch(/^\d{4}$/);

		const row = log.inserted[0];
		expect(answer).toEqual({ status: 201, body: toOrder(row) });
		expect(log.hints).toEqual([[ORDER_EVENTS.created, createdEvent(row, toOrder(row))]]);
		// Without an Idempotency-Key: no claim, and the batched insert rather than the claiming one.
		expect(log.claim).toEqual([]);
		expect(log.insertOrder).toEqual([]);
		expect(log.findActive).toEqual([]);
	});

	it("prices a quoted ride by verifying the quote, keeps its id, and takes the paise from the major amount when pricing gave none", async () => {
		const { log, run } = setup({
			call: {
				"pricing.verifyQuote": (p) => ({ ...PRICED, totalAmountPaise: undefined, totalAmount: 99.99, quoteId: (p as { quoteId: string }).quoteId }),
			},
		});
		const answer = await run(params({ quoteId: "qt_42" }));
		expect(log.calls[0]).toEqual([
			"pricing.verifyQuote",
			{ quoteId: "qt_42", serviceType: "cab", pickup: { lat: 12.9716, lng: 77.5946 }, drop: { lat: 12.9352, lng: 77.6245 } },
		]);
		expect(log.calls.map(([a]) => a)).not.toContain("pricing.quote");
		expect(log.insertNew[0]).toMatchObject({ quoteId: "qt_42", farePaise: 9999 });
		expect(answer.status).toBe(201);
	});

	it("upserts the rider without an email when none was given (the stored one is kept), and books in the key's live mode", async () => {
		const { log, run } = setup();
		await run(params({ user: { name: "Ravi", phone: "+919800000002" } }), { mode: "live" });
		const upsert = log.calls.find(([a]) => a === "riders.upsert")![1];
		// The live booking writes the live rider of that phone (riders are per mode).
		expect(upsert).toEqual({ partnerId: PARTNER, mode: "live", name: "Ravi", phone: "+919800000002" });
		expect(upsert).not.toHaveProperty("email");
		expect(log.insertNew[0].mode).toBe("live");
	});
});

describe("createOrder: the rider already has an active ride", () => {
	it("answers 200 USER_HAVE_ACTIVE_RIDE with the active ride, read in the caller's partner and mode, and hints nothing", async () => {
		const existing = orderRowFixture({ id: "ord_active", rider_id: RIDER.riderId, status: "accepted" });
		const { log, run } = setup({ inserts: [null], active: [existing] });
		const answer = await run(undefined, { mode: "test" });
		expect(answer).toEqual({ status: 200, body: { code: "USER_HAVE_ACTIVE_RIDE", ...toOrder(existing) } });
		expect(log.findActive).toEqual([[RIDER.riderId, { partnerId: PARTNER, mode: "test" }]]);
		expect(log.hints).toEqual([]);
		expect(log.finish).toEqual([]);
	});

	it("tries the insert again, with a new order id, when the active ride ended between the conflict and the read", async () => {
		const { log, run } = setup({ inserts: [null, "row"], active: [null] });
		const answer = await run();
		expect(log.insertNew).toHaveLength(2);
		expect(log.insertNew[1].id).not.toBe(log.insertNew[0].id);
		expect(answer.status).toBe(201);
		expect(answer.body.orderId).toBe(log.insertNew[1].id);
	});

	it("gives up with 409 CONFLICT after five inserts that each lost to a ride that then ended", async () => {
		const { log, run } = setup({ inserts: [null], active: [null] });
		const err = await failure(run());
		expect(err).toBeInstanceOf(ApiError);
		expect(err).toMatchObject({ code: 409, type: "CONFLICT" });
		expect(log.insertNew).toHaveLength(5);
		expect(log.hints).toEqual([]);
	});
});

describe("createOrder: Idempotency-Key", () => {
	it("replays a finished call's answer without pricing, upserting or inserting anything", async () => {
		const stored = { orderId: "ord_earlier", status: "searching" };
		const { log, run } = setup({ claim: { kind: "replay", status: 201, body: stored } });
		const p = params();
		const answer = await run(p, { idempotencyKey: "key-1", mode: "live" });
		expect(answer).toEqual({ status: 201, body: stored });
		expect(log.claim).toEqual([[PARTNER, "live", "key-1", requestHash(p)]]);
		expect(log.calls).toEqual([]);
		expect(log.insertNew).toEqual([]);
		expect(log.insertOrder).toEqual([]);
	});

	it("inserts through the claiming statement with the 201 answer template, never through the batched insert", async () => {
		const { log, run } = setup({ claim: { kind: "claimed", claim } });
		const answer = await run(undefined, { idempotencyKey: "key-1" });
		expect(log.insertNew).toEqual([]);
		expect(log.insertOrder).toHaveLength(1);
		const { order, claim: used, answer: template } = log.insertOrder[0];
		expect(used).toEqual(claim);
		expect(template).toEqual(answerTemplate(order));
		expect(answer).toEqual({ status: 201, body: toOrder(log.inserted[0]) });
		expect(log.release).toEqual([]);
		// The claim was finished by the insert itself.
		expect(log.finish).toEqual([]);
	});

	it("stores the 200 active-ride answer on the claim", async () => {
		const existing = orderRowFixture({ id: "ord_active", rider_id: RIDER.riderId, status: "arrived" });
		const { log, run } = setup({ claim: { kind: "claimed", claim }, inserts: [null], active: [existing] });
		const answer = await run(undefined, { idempotencyKey: "key-1" });
		expect(answer.status).toBe(200);
		expect(log.finish).toEqual([[claim, 200, answer.body]]);
		expect(log.release).toEqual([]);
	});

	it("answers 409 IDEMPOTENCY_KEY_IN_USE when the claim was taken over before the insert, and releases it", async () => {
		const { log, run } = setup({ claim: { kind: "claimed", claim }, claimLost: true });
		const err = await failure(run(undefined, { idempotencyKey: "key-1" }));
		expect(err).toMatchObject({ code: 409, type: "IDEMPOTENCY_KEY_IN_USE" });
		expect(log.release).toEqual([claim]);
		expect(log.hints).toEqual([]);
	});

	it("frees the key of a call that failed after claiming it, and still fails the call when the release fails", async () => {
		const quoteExpired = new ApiError("QUOTE_EXPIRED", "The quote has expired");
		const { deps, log, run } = setup({ claim: { kind: "claimed", claim }, call: { "pricing.verifyQuote": () => Promise.reject(quoteExpired) } });
		expect(await failure(run(params({ quoteId: "qt_old" }), { idempotencyKey: "key-1" }))).toBe(quoteExpired);
		expect(log.release).toEqual([claim]);

		deps.keys.release = async () => {
			throw new Error("database away");
		};
		expect(await failure(run(params({ quoteId: "qt_old" }), { idempotencyKey: "key-1" }))).toBe(quoteExpired);
		expect(log.warnings).toEqual([["Could not release an idempotency key", "database away"]]);
	});
});

describe("createOrder: refused requests change nothing", () => {
	async function refused(s: Setup, p: CreateOrderParams, meta: OrdersMeta = {}) {
		const { log, run } = setup(s);
		const err = await failure(run(p, meta));
		return { err, log };
	}

	it("refuses an empty Idempotency-Key before claiming anything", async () => {
		const { err, log } = await refused({}, params(), { idempotencyKey: "" });
		expect(err).toMatchObject({ code: 400, type: "VALIDATION_ERROR", data: { details: [{ field: "Idempotency-Key" }] } });
		expect(log.claim).toEqual([]);
		expect(log.calls).toEqual([]);
	});

	it("refuses metadata over 4096 serialised bytes", async () => {
		const { err, log } = await refused({}, params({ metadata: { note: "x".repeat(5000) } }));
		expect(err).toMatchObject({ code: 400, type: "VALIDATION_ERROR", data: { details: [{ field: "metadata" }] } });
		expect(log.calls).toEqual([]);
	});

	it("refuses sandbox controls on a live key, and accepts them on a test key", async () => {
		const sandboxed = params({ metadata: { sandbox: { driverDelayMs: 0 } } });
		const { err, log } = await refused({}, sandboxed, { mode: "live" });
		expect(err).toMatchObject({ code: 400, type: "VALIDATION_ERROR", data: { details: [{ field: "metadata.sandbox" }] } });
		expect(log.calls).toEqual([]);

		const test = setup();
		await expect(test.run(sandboxed, { mode: "test" })).resolves.toMatchObject({ status: 201 });
		expect(test.log.insertNew[0].metadata).toEqual({ sandbox: { driverDelayMs: 0 } });
	});

	it.each(["https://partner.example.com:5432/hooks", "http://partner.example.com:8080/", "http://partner.example.com/"])(
		"refuses %s (port outside WEBHOOK_PORTS 443, 8443) before pricing",
		async (webhookURL) => {
			const { err, log } = await refused({ webhookPolicy: { allowPrivate: true, ports: [443, 8443] } }, params({ webhookURL }));
			expect(err).toMatchObject({ code: 400, type: "INVALID_WEBHOOK_URL" });
			expect(log.calls).toEqual([]);
		},
	);

	it("refuses a webhook URL that is not http(s) before pricing", async () => {
		const { err, log } = await refused({}, params({ webhookURL: "ftp://partner.example.com/hooks" }));
		expect(err).toMatchObject({ code: 400, type: "INVALID_WEBHOOK_URL" });
		expect(log.calls).toEqual([]);
	});

	it("passes a quote error through, without writing the rider or an order", async () => {
		const invalid = new ApiError("QUOTE_INVALID", "Unknown quote");
		const { err, log } = await refused({ call: { "pricing.verifyQuote": () => Promise.reject(invalid) } }, params({ quoteId: "qt_x" }));
		expect(err).toBe(invalid);
		expect(log.calls.map(([a]) => a)).toEqual(["pricing.verifyQuote"]);
		expect(log.insertNew).toEqual([]);
	});

	it("answers 503 SERVICE_UNAVAILABLE when pricing is not there, without writing the rider or an order", async () => {
		const gone = Object.assign(new Error("Service 'pricing.quote' is not found."), { name: "ServiceNotFoundError" });
		const { err, log } = await refused({ call: { "pricing.quote": () => Promise.reject(gone) } }, params());
		expect(err).toMatchObject({ code: 503, type: "SERVICE_UNAVAILABLE" });
		expect(log.calls.map(([a]) => a)).toEqual(["pricing.quote"]);
		expect(log.insertNew).toEqual([]);
	});

	it("inserts nothing when the rider upsert fails", async () => {
		const broken = new Error("riders exploded");
		const { err, log } = await refused({ call: { "riders.upsert": () => Promise.reject(broken) } }, params());
		expect(err).toBe(broken);
		expect(log.insertNew).toEqual([]);
		expect(log.hints).toEqual([]);
	});
});
