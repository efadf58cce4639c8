import type { SigningSecret } from "../../../services/notifications/signing";
import type { Logger } from "moleculer";
import { Webhook } from "standardwebhooks";
import { newWebhookSecret } from "../../../lib/secrets";
import { DeliveryLoop, type DeliveryLoopDeps } from "../../../services/notifications/delivery-loop";
import type { AttemptRecord, ClaimCaps, ClaimedRow, NotificationsRepo } from "../../../services/notifications/notifications.repo";
import { readNotificationsSettings, type NotificationsSettings } from "../../../services/notifications/notifications.settings";
import type { OutageWarnings } from "../../../services/notifications/outage-warnings";
import { webhookBody } from "../../../services/notifications/signing";
import type { AttemptResult, WebhookClient } from "../../../services/notifications/webhook-client";
import type { HostBreakerState } from "../../../services/notifications/host-breaker";
import { sleep, waitFor } from "../../helpers/wait";
import { FIRST_API_VERSION } from "../../../contracts/versions";

/**
 * The delivery loop (services/notifications/delivery-loop.ts) with a fake
 * repo, a fake webhook client and a fake signing-secret source: no broker,
 * no PostgreSQL, no HTTP. Ticks are driven with requestTick()/hint(); the
 * poll (start()) is never started.
 */

const INSTANCE = "notifications-1";
const SECRET = newWebhookSecret();

function claimedRow(eventId: string, overrides: Partial<ClaimedRow> = {}): ClaimedRow {
	return {
		event_id: eventId,
		order_id: "ord_1",
		partner_id: "ptn_1",
		mode: "test",
		kind: "status",
		host: "partner.example.com",
		sequence: 1,
		attempts: 0,
		round_attempts: 0,
		first_attempt_at: null,
		occurred_at: new Date(),
		event_created_at: new Date(),
		webhook_url: "https://partner.example.com/hooks",
		payload: { eventId, orderId: "ord_1", status: "accepted", sequence: 1 },
		...overrides,
	};
}

class FakeRepo {
	/** What each claim answers, in turn; then nothing. */
	batches: ClaimedRow[][] = [];
	claimFails = 0;
	claims: Array<{ status: number; location: number; token: string; owner: string; leaseMs: number; locationTtlMs: number; caps: ClaimCaps }> = [];
	/** Every statement, in order. */
	log: string[] = [];
	ingested: string[][] = [];
	records: AttemptRecord[] = [];
	/** Events whose lease another instance holds by the time the try is recorded. */
	leaseLost = new Set<string>();
	released: Array<[string, string, number]> = [];
	delivered: Array<[string, number | null, string]> = [];
	hostFailures: Array<{ partnerId: string; host: string; decision: unknown }> = [];
	hostState: HostBreakerState = { failures: 0, opens: 0, phase: "closed" };
	releasedOwners: string[] = [];

	async claim(
		status: number,
		location: number,
		token: string,
		owner: string,
		leaseMs: number,
		locationTtlMs: number,
		caps: ClaimCaps,
	): Promise<ClaimedRow[]> {
		this.log.push("claim");
		this.claims.push({ status, location, token, owner, leaseMs, locationTtlMs, caps });
		if (this.claimFails > 0) {
			this.claimFails--;
			throw new Error("connection terminated");
		}
		return this.batches.shift() ?? [];
	}
	async ingestIds(ids: string[]): Promise<number> {
		this.log.push("ingestIds");
		this.ingested.push(ids);
		await sleep(5);
		this.log.push("ingested");
		return ids.length;
	}
	async recordAttempts(batch: readonly AttemptRecord[]): Promise<Set<string>> {
		this.log.push("record");
		this.records.push(...batch);
		return new Set(batch.map((a) => a.eventId).filter((id) => !this.leaseLost.has(id)));
	}
	async markDelivered(eventId: string, status: number | null, startedAt: string): Promise<void> {
		this.delivered.push([eventId, status, startedAt]);
	}
	async release(eventId: string, token: string, delayMs: number): Promise<void> {
		this.released.push([eventId, token, delayMs]);
	}
	async hostFailed<T>(partnerId: string, host: string, decide: (s: HostBreakerState) => T): Promise<T> {
		const decision = decide(this.hostState);
		this.hostFailures.push({ partnerId, host, decision });
		return decision;
	}
	async releaseOwner(owner: string): Promise<string[]> {
		this.releasedOwners.push(owner);
		return [];
	}
}

const answered = (status: number, outcome: AttemptResult["outcome"] = "delivered"): AttemptResult => ({
	outcome,
	status,
	durationMs: 12.4,
	snippet: `answer ${status}`,
});

interface Sent {
	eventId: string;
	url: string;
	headers: Record<string, string>;
	body: Buffer;
	signal?: AbortSignal;
}

function setup(
	opts: {
		settings?: Partial<NotificationsSettings>;
		answer?: (sent: Sent) => AttemptResult | Promise<AttemptResult>;
		secret?: () => Promise<readonly SigningSecret[]>;
	} = {},
) {
	const repo = new FakeRepo();
	const sent: Sent[] = [];
	const client: WebhookClient = {
		async send(url, headers, body, signal) {
			const s = { eventId: headers["webhook-id"], url, headers, body, signal };
			sent.push(s);
			return (opts.answer ?? (() => answered(200)))(s);
		},
		close: () => undefined,
	};
	const warned: Array<[string, string]> = [];
	const logged: string[] = [];
	const logger = {
		info: (m: string) => void logged.push(m),
		warn: (m: string) => void logged.push(m),
		debug: () => undefined,
		error: () => undefined,
	} as unknown as Logger;
	const secretFetches: string[] = [];
	const settings: NotificationsSettings = {
		...readNotificationsSettings({}),
		concurrency: 4,
		locationConcurrency: 2,
		retryScheduleMs: [10_000, 60_000],
		...opts.settings,
	};
	const deps: DeliveryLoopDeps = {
		repo: repo as unknown as NotificationsRepo,
		client,
		settings,
		instanceId: INSTANCE,
		logger,
		warnings: { warn: (key: string, message: string) => void warned.push([key, message]) } as unknown as OutageWarnings,
		async fetchSigningSecret(partnerId) {
			secretFetches.push(partnerId);
			return { secrets: opts.secret ? await opts.secret() : [{ secret: SECRET, validUntil: null }], apiVersion: FIRST_API_VERSION };
		},
	};
	const loop = new DeliveryLoop(deps);
	return { loop, repo, sent, warned, logged, secretFetches, settings };
}

/** A promise and its resolve, to hold a try in flight. */
function deferred<T>() {
	let resolve!: (value: T) => void;
	const promise = new Promise<T>((r) => (resolve = r));
	return { promise, resolve };
}

const until = (what: string, probe: () => unknown) => waitFor(what, probe, 5_000, 2);

describe("DeliveryLoop: one try", () => {
	it("sends a claimed event signed to its webhook URL and records it delivered under the claim's lease token", async () => {
		const { loop, repo, sent, settings } = setup();
		const row = claimedRow("evt_1", { attempts: 2 });
		repo.batches.push([row]);
		loop.requestTick();
		await until("the try recorded", () => repo.records.length === 1);

		// The claim asks for this instance's free slots of each kind, with its lease and the fairness caps.
		expect(repo.claims[0]).toMatchObject({
			status: 4,
			location: 2,
			owner: INSTANCE,
			leaseMs: settings.leaseMs,
			locationTtlMs: settings.locationTtlMs,
			caps: { partnerCap: settings.partnerConcurrency, hostCap: settings.hostConcurrency },
		});
		expect(sent).toHaveLength(1);
		expect(sent[0].url).toBe(row.webhook_url);
		expect(sent[0].body).toEqual(webhookBody(row.payload, "test", FIRST_API_VERSION));
		// What a partner verifies with its secret: the payload, under the event's id, in the partner's pinned version.
		expect(new Webhook(SECRET).verify(sent[0].body.toString("utf8"), { ...sent[0].headers })).toEqual({
			...row.payload,
			mode: "test",
			apiVersion: FIRST_API_VERSION,
		});
		expect(sent[0].headers["ride-version"]).toBe(FIRST_API_VERSION);
		expect(sent[0].headers["webhook-id"]).toBe("evt_1");

		const record = repo.records[0];
		expect(record).toMatchObject({
			eventId: "evt_1",
			leaseToken: repo.claims[0].token,
			state: "delivered",
			nextAttemptAt: null,
			httpStatus: 200,
			outcome: "delivered",
			durationMs: 12,
			snippet: "answer 200",
			attempt: 3,
			instance: INSTANCE,
			host: "partner.example.com",
			partnerId: "ptn_1",
		});
		expect(record.attemptId).toMatch(/^att_/);
		// First try of the round: it starts the round.
		expect(record.firstAttemptAt).toBe(record.startedAt);
		expect(repo.released).toEqual([]);
		expect(repo.delivered).toEqual([]);
		expect(repo.hostFailures).toEqual([]);
		await until("the slot freed", () => loop.inFlightCount === 0);
	});

	it("records a failed try pending at the schedule's first offset after the round's first try (plus at most 10% jitter)", async () => {
		const { loop, repo } = setup({ answer: () => answered(500, "HTTP_5XX") });
		repo.batches.push([claimedRow("evt_1")]);
		loop.requestTick();
		await until("the try recorded", () => repo.records.length === 1);
		const record = repo.records[0];
		expect(record.state).toBe("pending");
		const delay = Date.parse(record.nextAttemptAt!) - Date.parse(record.startedAt);
		expect(delay).toBeGreaterThanOrEqual(10_000 - 1);
		expect(delay).toBeLessThanOrEqual(11_000 + 1);
		// The host answered (a 5xx is an answer): its circuit breaker is not touched.
		expect(repo.hostFailures).toEqual([]);
	});

	it("counts a try the host did not answer against the host's circuit breaker", async () => {
		const { loop, repo, logged, settings } = setup({
			settings: { breakerFailures: 1 },
			answer: () => ({ outcome: "CONNECTION", status: null, durationMs: 3, snippet: "ECONNREFUSED" }),
		});
		repo.batches.push([claimedRow("evt_1", { host: "down.example.com:8443" })]);
		loop.requestTick();
		await until("the breaker updated", () => repo.hostFailures.length === 1);
		expect(repo.records[0]).toMatchObject({ state: "pending", outcome: "CONNECTION", httpStatus: null });
		expect(repo.hostFailures[0]).toEqual({
			partnerId: "ptn_1",
			host: "down.example.com:8443",
			decision: { failures: 1, opens: 1, openForMs: settings.breakerOpenMs },
		});
		expect(logged.some((m) => m.includes("down.example.com:8443") && m.includes("circuit open"))).toBe(true);
	});

	it("records the round's last failed try as failed, keeping the round's first try time", async () => {
		const first = new Date(Date.now() - 120_000);
		const { loop, repo, logged } = setup({ answer: () => answered(404, "HTTP_4XX") });
		repo.batches.push([claimedRow("evt_1", { attempts: 2, round_attempts: 2, first_attempt_at: first })]);
		loop.requestTick();
		await until("the try recorded", () => repo.records.length === 1);
		expect(repo.records[0]).toMatchObject({ state: "failed", nextAttemptAt: null, attempt: 3, firstAttemptAt: first.toISOString() });
		expect(logged.some((m) => m.includes("evt_1") && m.includes("failed after its last try"))).toBe(true);
	});

	it("marks an event delivered when its lease was lost meanwhile but the partner answered 2xx; a failed try with a lost lease changes nothing", async () => {
		const { loop, repo } = setup({ answer: (s) => (s.eventId === "evt_ok" ? answered(204) : answered(500, "HTTP_5XX")) });
		repo.leaseLost.add("evt_ok").add("evt_bad");
		repo.batches.push([claimedRow("evt_ok", { order_id: "ord_a" }), claimedRow("evt_bad", { order_id: "ord_b" })]);
		loop.requestTick();
		await until("both tries recorded", () => repo.records.length === 2 && loop.inFlightCount === 0);
		const ok = repo.records.find((r) => r.eventId === "evt_ok")!;
		expect(repo.delivered).toEqual([["evt_ok", 204, ok.startedAt]]);
	});

	it("gives a claim back for 5 s, sending nothing, when the partner's signing secret cannot be had", async () => {
		const { loop, repo, sent, warned } = setup({ secret: () => Promise.reject(new Error("partners unavailable")) });
		repo.batches.push([claimedRow("evt_1")]);
		loop.requestTick();
		await until("the claim released", () => repo.released.length === 1);
		expect(repo.released).toEqual([["evt_1", repo.claims[0].token, 5_000]]);
		expect(sent).toEqual([]);
		expect(repo.records).toEqual([]);
		expect(warned.map(([key]) => key)).toEqual(["secret:ptn_1"]);
	});

	it("keeps a partner's secret for later tries, and fetches it again after forgetSigningSecret", async () => {
		const { loop, repo, secretFetches } = setup();
		repo.batches.push([claimedRow("evt_1")]);
		loop.requestTick();
		await until("the first try recorded", () => repo.records.length === 1);
		repo.batches.push([claimedRow("evt_2", { order_id: "ord_2" })]);
		loop.requestTick();
		await until("the second try recorded", () => repo.records.length === 2);
		expect(secretFetches).toEqual(["ptn_1"]);
		loop.forgetSigningSecret("ptn_1");
		repo.batches.push([claimedRow("evt_3", { order_id: "ord_3" })]);
		loop.requestTick();
		await until("the third try recorded", () => repo.records.length === 3);
		expect(secretFetches).toEqual(["ptn_1", "ptn_1"]);
	});
});

describe("DeliveryLoop: ticks and slots", () => {
	it("ingests hinted events by id before the claim of the same tick, and only while there are hints", async () => {
		const { loop, repo } = setup();
		loop.hint("evt_a");
		loop.hint("evt_b");
		loop.hint("evt_a");
		await until("a claim", () => repo.claims.length === 1);
		expect(repo.ingested).toEqual([["evt_a", "evt_b"]]);
		// The claim waits for the ingest: it can lease the hinted events at once.
		expect(repo.log).toEqual(["ingestIds", "ingested", "claim"]);
		loop.requestTick();
		await until("a second claim", () => repo.claims.length === 2);
		expect(repo.log).toEqual(["ingestIds", "ingested", "claim", "claim"]);
	});

	it("claims only free slots of each kind, claims nothing while all are busy, and claims again as a try ends", async () => {
		const held = new Map<string, ReturnType<typeof deferred<AttemptResult>>>();
		const { loop, repo, sent } = setup({
			settings: { concurrency: 2, locationConcurrency: 1 },
			answer: (s) => {
				const d = deferred<AttemptResult>();
				held.set(s.eventId, d);
				return d.promise;
			},
		});
		repo.batches.push([claimedRow("evt_s1"), claimedRow("evt_s2", { order_id: "ord_2" }), claimedRow("evt_l1", { kind: "location", order_id: "ord_3" })]);
		loop.requestTick();
		await until("three tries in flight", () => sent.length === 3);
		expect(repo.claims.map((c) => [c.status, c.location])).toEqual([[2, 1]]);
		expect(loop.inFlightCount).toBe(3);

		loop.requestTick();
		await sleep(20);
		// Every slot is taken: no claim at all.
		expect(repo.claims).toHaveLength(1);

		held.get("evt_s1")!.resolve(answered(200));
		// The finished try frees one status slot and asks for a tick by itself.
		await until("a claim for the freed slot", () => repo.claims.length === 2);
		expect([repo.claims[1].status, repo.claims[1].location]).toEqual([1, 0]);
		expect(loop.inFlightCount).toBe(2);
		held.get("evt_s2")!.resolve(answered(200));
		held.get("evt_l1")!.resolve(answered(200));
		await until("all recorded", () => repo.records.length === 3 && loop.inFlightCount === 0);
	});

	it("warns when a claim fails and claims again on the next tick", async () => {
		const { loop, repo, warned } = setup();
		repo.claimFails = 1;
		loop.requestTick();
		await until("the failed claim", () => repo.claims.length === 1);
		await until("the warning", () => warned.length === 1);
		expect(warned[0][0]).toBe("claim");
		repo.batches.push([claimedRow("evt_1")]);
		loop.requestTick();
		await until("the try recorded", () => repo.records.length === 1);
	});
});

describe("DeliveryLoop: stop", () => {
	it("lets a try in flight finish and be recorded, then gives back this instance's claims, and claims nothing after", async () => {
		const d = deferred<AttemptResult>();
		const { loop, repo, sent } = setup({ answer: () => d.promise });
		repo.batches.push([claimedRow("evt_1")]);
		loop.requestTick();
		await until("the try in flight", () => sent.length === 1);

		let stopped = false;
		const stopping = loop.stop().then(() => (stopped = true));
		await sleep(20);
		expect(stopped).toBe(false);
		expect(repo.releasedOwners).toEqual([]);

		d.resolve(answered(200));
		await stopping;
		expect(repo.records.map((r) => [r.eventId, r.state])).toEqual([["evt_1", "delivered"]]);
		expect(repo.releasedOwners).toEqual([INSTANCE]);
		// The try's end no longer claims, and neither do hints.
		const claims = repo.claims.length;
		loop.hint("evt_2");
		loop.requestTick();
		await sleep(20);
		expect(repo.claims).toHaveLength(claims);
		expect(repo.ingested).toEqual([]);
	});

	it("cuts a try short past the grace period and gives its claim back at once, not counting it as a try", async () => {
		const { loop, repo, sent } = setup({
			settings: { stopGraceMs: 30 },
			answer: (s) =>
				new Promise<AttemptResult>((resolve) =>
					s.signal!.addEventListener("abort", () => resolve({ outcome: "TIMEOUT", status: null, durationMs: 30, snippet: "aborted" })),
				),
		});
		repo.batches.push([claimedRow("evt_1")]);
		loop.requestTick();
		await until("the try in flight", () => sent.length === 1);
		await loop.stop();
		expect(sent[0].signal!.aborted).toBe(true);
		expect(repo.released).toEqual([["evt_1", repo.claims[0].token, 0]]);
		expect(repo.records).toEqual([]);
		expect(repo.hostFailures).toEqual([]);
		expect(repo.releasedOwners).toEqual([INSTANCE]);
	});
});
