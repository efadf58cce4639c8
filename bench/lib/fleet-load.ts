/**
 * The `fleet` path's load generator, in its own process (forked by
 * bench/paths/fleet.ts with an IPC channel): a fleet of driver apps against
 * one gateway on 127.0.0.1, over node:http with one keep-alive Agent.
 *
 * - `online`: `POST /driver/online` for a range of drivers.
 * - `polls`: each driver holds a `POST /driver/offers` long-poll and issues
 *   the next one as soon as it returns. The first wait of driver i is
 *   1 + (i mod 20) s, so with 20 s waits the returns are spread evenly and
 *   not in one wave.
 * - `pings`: open loop on a schedule: ping k of the fleet is due at
 *   t0 + k × interval / drivers (whatever happened before), each driver
 *   every `intervalMs`, moving 5-25 m on a slowly turning heading within
 *   the disk around the centre (≤ 30 m per 4 s). Latency is from the send.
 * - `rides`: partner `POST /ride/create-order` (a live key) open loop at a
 *   rate (offer latency), or closed loop with a number of workers each
 *   waiting for its ride to be dropped (end to end).
 * - What a driver does with an offer (`policy`): `decline` (at once, and
 *   the bench's partner cancels the ride so nobody else is offered it; only
 *   the first offer of a ride is timed) or `script` (accept, arrived, start
 *   with the OTP the partner got in the create-order answer, handed over in
 *   this process's memory, drop; no think time).
 * - A webhook receiver on 127.0.0.1 notes the first `accepted` of each ride.
 *
 * Every request has a timeout, and the process exits by itself when its
 * parent goes away or after `maxSeconds`.
 */
import { Agent, createServer, request } from "node:http";
import type { AddressInfo } from "node:net";
import { randomInt } from "node:crypto";
import { performance } from "node:perf_hooks";
import { bearingDegrees, destinationPoint, haversineMeters } from "../../lib/geo";

interface Driver {
	id: string;
	token: string;
	lat: number;
	lng: number;
	heading: number;
	polling: boolean;
	/** Bumped by each loop started: an older loop still waiting on its last answer ends instead of running beside the new one (one wait per driver, as an app does). */
	pollLoop: number;
}

interface Answer {
	status: number;
	body: string;
	ms: number;
}

const agent = new Agent({ keepAlive: true, maxSockets: Infinity, maxFreeSockets: 4096, keepAliveMsecs: 1000 });
let base = { host: "127.0.0.1", port: 0 };
let drivers: Driver[] = [];
let centre = { lat: 12.9716, lng: 77.5946 };
let radiusM = 2000;
let partnerKey = "";
let policy: "decline" | "script" | "acceptCancel" | "accept" = "decline";

function post(path: string, token: string, body: unknown, timeoutMs: number): Promise<Answer> {
	const data = JSON.stringify(body);
	const t0 = performance.now();
	return new Promise((resolve) => {
		let done = false;
		const finish = (status: number, text: string) => {
			if (done) return;
			done = true;
			resolve({ status, body: text, ms: performance.now() - t0 });
		};
		const req = request(
			{
				...base,
				agent,
				method: "POST",
				path,
				headers: { "content-type": "application/json", "content-length": Buffer.byteLength(data), authorization: `Bearer ${token}` },
				timeout: timeoutMs,
			},
			(res) => {
				const chunks: Buffer[] = [];
				res.on("data", (c: Buffer) => chunks.push(c));
				res.on("end", () => finish(res.statusCode ?? 0, Buffer.concat(chunks).toString("utf8")));
				res.on("error", () => finish(0, ""));
			},
		);
		req.on("timeout", () => {
			req.destroy();
			finish(-1, "timeout");
		});
		req.on("error", (err: NodeJS.ErrnoException) => finish(0, err.code ?? "error"));
		req.end(data);
	});
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function pct(values: number[], p: number): number {
	if (values.length === 0) return NaN;
	const s = [...values].sort((a, b) => a - b);
	return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
}

/** Counts of one kind of request since the last `mark`. */
class Tally {
	sent = 0;
	ok = 0;
	byStatus: Record<string, number> = {};
	latencies: number[] = [];
	maxLagMs = 0;
	answered = 0;
	note(a: Answer): void {
		const key = a.status === 0 ? a.body : a.status === -1 ? "timeout" : String(a.status);
		if (a.status >= 200 && a.status < 300) this.ok++;
		else this.byStatus[key] = (this.byStatus[key] ?? 0) + 1;
		if (!Number.isNaN(a.ms)) this.latencies.push(a.ms);
		this.answered++;
	}
	summary() {
		return {
			sent: this.sent,
			done: this.answered,
			ok: this.ok,
			byStatus: this.byStatus,
			p50: pct(this.latencies, 50),
			p99: pct(this.latencies, 99),
			max: this.latencies.length ? Math.max(...this.latencies) : NaN,
			maxLagMs: this.maxLagMs,
		};
	}
}

let pings = new Tally();
let polls = new Tally();
/** Offer latency: the create-order 201 and the first offer of each ride, on this process's clock. */
const created = new Map<string, { at: number; sent: number; otp?: string }>();
const firstOffer = new Map<string, number>();
const acceptedHook = new Map<string, number>();
/** acceptCancel: the partner's cancel sent, and the customer_cancelled webhook received, per ride. */
const cancelSent = new Map<string, number>();
const cancelledHook = new Map<string, number>();
/** Think time of the scripted drivers per ride: offer seen → accept sent. */
const think = new Map<string, number>();
let offerSeenBefore201 = 0;
let steps = new Tally();
let cancels = new Tally();
let creates = new Tally();
let dropped = 0;
const droppedWaiters = new Map<string, () => void>();

// ---- the fleet --------------------------------------------------------------------

function place(i: number): { lat: number; lng: number } {
	return destinationPoint(centre, (i * 137.508) % 360, radiusM * Math.sqrt(Math.random()));
}

async function online(from: number, to: number, concurrency: number): Promise<{ ok: number; failed: Record<string, number>; ms: number }> {
	const t0 = Date.now();
	let next = from;
	let ok = 0;
	const failed: Record<string, number> = {};
	const worker = async () => {
		while (next < to) {
			const d = drivers[next++];
			const a = await post("/driver/online", d.token, { location: { lat: d.lat, lng: d.lng, heading: d.heading } }, 30_000);
			if (a.status === 200) ok++;
			else failed[String(a.status)] = (failed[String(a.status)] ?? 0) + 1;
		}
	};
	await Promise.all(Array.from({ length: concurrency }, worker));
	return { ok, failed, ms: Date.now() - t0 };
}

async function offline(from: number, to: number): Promise<number> {
	for (let i = from; i < to; i++) drivers[i].polling = false;
	let ok = 0;
	let next = from;
	const worker = async () => {
		while (next < to) {
			const d = drivers[next++];
			if ((await post("/driver/offline", d.token, {}, 30_000)).status === 200) ok++;
		}
	};
	await Promise.all(Array.from({ length: 32 }, worker));
	return ok;
}

interface OfferJob {
	offer: { orderId: string; pickup?: { lat: number; lng: number } } | null;
	ride: { orderId: string; status?: string; pickup?: { lat: number; lng: number } } | null;
}

async function pollLoop(d: Driver, index: number, waitSeconds: number): Promise<void> {
	const loop = ++d.pollLoop;
	let wait = 1 + (index % waitSeconds);
	while (d.polling && d.pollLoop === loop) {
		polls.sent++;
		const a = await post("/driver/offers", d.token, { waitSeconds: wait }, (wait + 15) * 1000);
		if (d.pollLoop !== loop) return;
		const seenAt = Date.now();
		wait = waitSeconds;
		polls.note(a);
		if (a.status !== 200) {
			await sleep(1000);
			continue;
		}
		let job: OfferJob;
		try {
			job = JSON.parse(a.body) as OfferJob;
		} catch {
			continue;
		}
		const orderId = job.offer?.orderId ?? job.ride?.orderId;
		if (!orderId) continue;
		if (job.offer && !firstOffer.has(orderId)) {
			firstOffer.set(orderId, seenAt);
			if (!created.has(orderId)) offerSeenBefore201++;
		}
		if (policy === "decline") await declineAndCancel(d, orderId, !!job.offer);
		else if (policy === "acceptCancel") await acceptThenCancel(d, orderId, seenAt, !!job.offer);
		else if (policy === "accept") {
			// Accept and hold the ride: a busy driver (the background path).
			if (job.offer) steps.note(await post("/driver/accept", d.token, { orderId }, 30_000));
		} else await script(d, orderId, seenAt, job);
	}
}

/** The driver accepts, then the partner cancels at once: create → accepted and cancel → customer_cancelled, both timed. */
async function acceptThenCancel(d: Driver, orderId: string, seenAt: number, offered: boolean): Promise<void> {
	if (!offered) return;
	think.set(orderId, Date.now() - seenAt);
	steps.sent++;
	const a = await post("/driver/accept", d.token, { orderId }, 30_000);
	steps.note(a);
	if (a.status !== 200) return;
	cancels.sent++;
	cancelSent.set(orderId, Date.now());
	cancels.note(await post("/ride/cancel", partnerKey, { orderId, reason: "bench" }, 30_000));
}

async function declineAndCancel(d: Driver, orderId: string, offered: boolean): Promise<void> {
	if (offered) {
		steps.sent++;
		steps.note(await post("/driver/decline", d.token, { orderId }, 30_000));
	}
	cancels.sent++;
	cancels.note(await post("/ride/cancel", partnerKey, { orderId, reason: "bench" }, 30_000));
}

async function otpOf(orderId: string): Promise<string | undefined> {
	for (let i = 0; i < 200 && !created.get(orderId)?.otp; i++) await sleep(10);
	return created.get(orderId)?.otp;
}

/** accept → arrived → start (OTP) → drop; a ride already held resumes where it is. */
async function script(d: Driver, orderId: string, seenAt: number, job: OfferJob): Promise<void> {
	const step = async (path: string, body: Record<string, unknown>): Promise<boolean> => {
		steps.sent++;
		const a = await post(path, d.token, { orderId, ...body }, 30_000);
		steps.note(a);
		return a.status === 200;
	};
	let status = job.offer ? "offered" : (job.ride?.status ?? "accepted");
	if (status === "offered") {
		think.set(orderId, Date.now() - seenAt);
		if (!(await step("/driver/accept", {}))) return;
		status = "accepted";
	}
	// At the pickup: the step carries the position (arrived is refused away from the pickup).
	const pickup = job.offer?.pickup ?? job.ride?.pickup;
	if (status === "accepted" && !(await step("/driver/arrived", pickup ? { location: { lat: pickup.lat, lng: pickup.lng } } : {}))) return;
	if (status === "accepted" || status === "arrived") {
		const otp = await otpOf(orderId);
		if (!otp || !(await step("/driver/start", { otp }))) return;
	}
	if (await step("/driver/drop", {})) {
		dropped++;
		droppedWaiters.get(orderId)?.();
	}
}

// ---- pings ------------------------------------------------------------------------

let pingRun = 0;
/** Pings in flight; past MAX_PINGS_IN_FLIGHT a due ping is counted as not sent ("backlog") instead of opening yet another socket. */
let pingsInFlight = 0;
const MAX_PINGS_IN_FLIGHT = 2000;

function move(d: Driver): void {
	d.heading = (d.heading + randomInt(-20, 21) + 360) % 360;
	if (haversineMeters(centre, d) > radiusM) d.heading = Math.round(bearingDegrees(d, centre)) % 360;
	const next = destinationPoint(d, d.heading, 5 + Math.random() * 20);
	d.lat = Math.round(next.lat * 1e6) / 1e6;
	d.lng = Math.round(next.lng * 1e6) / 1e6;
}

function startPings(from: number, to: number, intervalMs: number, maxMs: number): void {
	const run = ++pingRun;
	const count = to - from;
	const t0 = performance.now();
	let k = 0;
	const tick = () => {
		if (run !== pingRun) return;
		const now = performance.now();
		if (now - t0 > maxMs) return;
		for (; t0 + (k * intervalMs) / count <= now; k++) {
			const d = drivers[from + (k % count)];
			pings.maxLagMs = Math.max(pings.maxLagMs, now - (t0 + (k * intervalMs) / count));
			move(d);
			pings.sent++;
			if (pingsInFlight >= MAX_PINGS_IN_FLIGHT) {
				pings.note({ status: 0, body: "backlog", ms: NaN });
				continue;
			}
			pingsInFlight++;
			void post("/driver/location", d.token, { locations: [{ lat: d.lat, lng: d.lng, heading: d.heading }] }, 10_000).then((a) => {
				pingsInFlight--;
				pings.note(a);
			});
		}
		setTimeout(tick, 2);
	};
	tick();
}

// ---- rides (the partner) -------------------------------------------------------------

let rideRun = 0;
let hookUrl = "";

function orderBody(pickupJitterM: number): string {
	const pickup = destinationPoint(centre, randomInt(0, 360), Math.random() * pickupJitterM);
	return JSON.stringify({
		user: { name: "Fleet Rider", phone: `+9197${String(randomInt(0, 100_000_000)).padStart(8, "0")}` },
		serviceType: "cab",
		pickup: { lat: pickup.lat, lng: pickup.lng },
		drop: destinationPoint(centre, randomInt(0, 360), 3000),
		webhookURL: hookUrl,
	});
}

async function createRide(): Promise<string | undefined> {
	creates.sent++;
	const sent = Date.now();
	const a = await post("/ride/create-order", partnerKey, JSON.parse(orderBody(300)) as unknown, 30_000);
	const at = Date.now();
	creates.note(a);
	if (a.status !== 201) return undefined;
	const r = JSON.parse(a.body) as { orderId: string; otp?: string };
	created.set(r.orderId, { at, sent, otp: r.otp });
	return r.orderId;
}

function openLoopRides(rate: number, ms: number): void {
	const run = ++rideRun;
	const t0 = performance.now();
	let k = 0;
	const tick = () => {
		if (run !== rideRun) return;
		const now = performance.now();
		for (; t0 + (k * 1000) / rate <= now && (k * 1000) / rate < ms; k++) void createRide();
		if ((k * 1000) / rate < ms) setTimeout(tick, 5);
	};
	tick();
}

function closedLoopRides(workers: number, ms: number): void {
	const run = ++rideRun;
	const until = Date.now() + ms;
	const worker = async () => {
		while (run === rideRun && Date.now() < until) {
			const id = await createRide();
			if (!id) {
				await sleep(200);
				continue;
			}
			// Until its driver drops it (bounded: a ride nobody takes does not hold the worker for ever).
			await new Promise<void>((resolve) => {
				const t = setTimeout(resolve, 15_000);
				droppedWaiters.set(id, () => {
					clearTimeout(t);
					resolve();
				});
			});
			droppedWaiters.delete(id);
		}
	};
	for (let i = 0; i < workers; i++) void worker();
}

async function startHookReceiver(): Promise<void> {
	const server = createServer((req, res) => {
		const chunks: Buffer[] = [];
		req.on("data", (c: Buffer) => chunks.push(c));
		req.on("end", () => {
			const at = Date.now();
			try {
				const b = JSON.parse(Buffer.concat(chunks).toString("utf8")) as { orderId?: string; status?: string };
				if (b.status === "accepted" && b.orderId && !acceptedHook.has(b.orderId)) acceptedHook.set(b.orderId, at);
				if (b.status === "customer_cancelled" && b.orderId && !cancelledHook.has(b.orderId)) cancelledHook.set(b.orderId, at);
			} catch {
				/* not ours */
			}
			res.writeHead(200).end();
		});
	});
	await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
	hookUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks`;
	server.unref();
}

function rideStats() {
	const offerMs: number[] = [];
	const acceptedMs: number[] = [];
	/** Create-order sent → accepted webhook received, less the driver's think time: the platform's share as the partner sees it. */
	const acceptedFromSendMs: number[] = [];
	const cancelledMs: number[] = [];
	for (const [id, c] of created) {
		const sentCancel = cancelSent.get(id);
		const hookCancel = cancelledHook.get(id);
		if (sentCancel !== undefined && hookCancel !== undefined) cancelledMs.push(Math.max(0, hookCancel - sentCancel));
		const hook = acceptedHook.get(id);
		if (hook !== undefined) acceptedFromSendMs.push(Math.max(0, hook - c.sent - (think.get(id) ?? 0)));
		const o = firstOffer.get(id);
		if (o !== undefined) offerMs.push(Math.max(0, o - c.at));
		const h = acceptedHook.get(id);
		if (h !== undefined) acceptedMs.push(Math.max(0, h - c.at - (think.get(id) ?? 0)));
	}
	return {
		created: created.size,
		creates: creates.summary(),
		offered: offerMs.length,
		offerP50: pct(offerMs, 50),
		offerP99: pct(offerMs, 99),
		offerMax: offerMs.length ? Math.max(...offerMs) : NaN,
		offerSeenBefore201,
		accepted: acceptedMs.length,
		acceptedP50: pct(acceptedMs, 50),
		acceptedP99: pct(acceptedMs, 99),
		platformAccepted: { n: acceptedFromSendMs.length, p50: pct(acceptedFromSendMs, 50), p99: pct(acceptedFromSendMs, 99) },
		platformCancelled: { n: cancelledMs.length, sent: cancelSent.size, p50: pct(cancelledMs, 50), p99: pct(cancelledMs, 99) },
		thinkMax: think.size ? Math.max(...think.values()) : 0,
		dropped,
		steps: steps.summary(),
		cancels: cancels.summary(),
	};
}

// ---- commands from the bench ----------------------------------------------------------

type Command =
	| {
			cmd: "init";
			url: string;
			drivers: Array<{ id: string; token: string }>;
			centre?: { lat: number; lng: number };
			radiusM?: number;
			partnerKey?: string;
			maxSeconds: number;
	  }
	| { cmd: "online"; from: number; to: number; concurrency?: number }
	| { cmd: "offline"; from: number; to: number }
	| { cmd: "polls"; from: number; to: number; waitSeconds: number }
	| { cmd: "pings"; from: number; to: number; intervalMs: number; maxMs: number }
	| { cmd: "stopPings" }
	| { cmd: "policy"; policy: "decline" | "script" | "acceptCancel" | "accept" }
	| { cmd: "rides"; rate?: number; workers?: number; ms: number }
	| { cmd: "mark" }
	| { cmd: "stats" };

async function handle(c: Command): Promise<unknown> {
	switch (c.cmd) {
		case "init": {
			const u = new URL(c.url);
			base = { host: u.hostname, port: Number(u.port) };
			centre = c.centre ?? centre;
			radiusM = c.radiusM ?? radiusM;
			partnerKey = c.partnerKey ?? "";
			drivers = c.drivers.map((d, i) => ({ ...d, ...place(i), heading: randomInt(0, 360), polling: false, pollLoop: 0 }));
			setTimeout(() => process.exit(0), c.maxSeconds * 1000).unref();
			await startHookReceiver();
			return { drivers: drivers.length, hookUrl };
		}
		case "online":
			return online(c.from, c.to, c.concurrency ?? 64);
		case "offline":
			return offline(c.from, c.to);
		case "polls":
			for (let i = c.from; i < c.to; i++) {
				const d = drivers[i];
				if (d.polling) continue;
				d.polling = true;
				void pollLoop(d, i, c.waitSeconds);
			}
			return { polling: drivers.filter((d) => d.polling).length };
		case "pings":
			startPings(c.from, c.to, c.intervalMs, c.maxMs);
			return { rate: ((c.to - c.from) * 1000) / c.intervalMs };
		case "stopPings":
			pingRun++;
			return {};
		case "policy":
			policy = c.policy;
			return {};
		case "rides":
			if (c.workers) closedLoopRides(c.workers, c.ms);
			else openLoopRides(c.rate ?? 1, c.ms);
			return {};
		case "mark":
			pings = new Tally();
			polls = new Tally();
			steps = new Tally();
			cancels = new Tally();
			creates = new Tally();
			created.clear();
			firstOffer.clear();
			acceptedHook.clear();
			cancelSent.clear();
			cancelledHook.clear();
			think.clear();
			offerSeenBefore201 = 0;
			dropped = 0;
			return {};
		case "stats":
			return { pings: pings.summary(), polls: polls.summary(), rides: rideStats(), sockets: Object.values(agent.sockets).flat().length };
	}
}

process.on("message", (m: { id: number } & Command) => {
	handle(m).then(
		(result) => process.send!({ id: m.id, result }),
		(err: unknown) => process.send!({ id: m.id, error: String((err as Error)?.stack ?? err) }),
	);
});
process.on("disconnect", () => process.exit(0));
