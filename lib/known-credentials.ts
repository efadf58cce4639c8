import { envInt, type Env } from "./settings";

/**
 * Which credentials (API keys, driver tokens) are live, as 64-bit prefixes of
 * their SHA-256 digests, kept in memory by the service that owns them.
 *
 * Why: the gateway throttles an address that keeps sending unknown
 * credentials, but a throttled address may be shared (one Ingress, one NAT,
 * one office) with partners and drivers whose credentials are valid. So a
 * throttled request is not refused outright: the gateway asks the owning
 * service with `onlyKnown: true`, and the service answers "unknown" from this
 * set, without touching the database, when no live credential has the
 * digest's prefix; otherwise it looks the credential up as usual. A valid
 * credential is therefore never refused by the throttle, and random ones
 * cost no database lookup (one in 2^64 passes the prefix and costs one).
 *
 * Kept current: a full read at start (paged by primary key), the credentials
 * this instance creates added at once, a re-read of the rows created since
 * the last read on every "created" event of any instance and every
 * `refreshMs`, and a full re-read (which drops revoked ones) on revocations
 * and every `reloadMs`. A revoked credential still in the set only costs a
 * lookup, which the service's own cache answers.
 *
 * Memory: an open-addressing table of 8 bytes a slot, between a quarter and
 * half full (it doubles at half), so 16 to 32 bytes per live credential
 * (10,000 keys: at most 320 KiB; 1,000,000 driver tokens: at most 32 MiB;
 * 1024 slots at least), and never more than `max` credentials (default
 * 1,000,000). A full re-read builds the new table beside the old one before
 * it replaces it, so at most twice that for the moment. Past `max`
 * the set knows it is incomplete and answers "may be live" for everything:
 * every credential is looked up again (correct, only unprotected), and a
 * warning says so. Until the first read finished it answers the same.
 */

/** 64-bit values as two 32-bit halves in one Uint32Array; (0, 0) marks an empty slot. */
export class PrefixSet {
	private table: Uint32Array;
	private mask: number;
	private count = 0;

	constructor(expected = 0) {
		let slots = 1024;
		while (slots < expected * 2) slots *= 2;
		this.table = new Uint32Array(slots * 2);
		this.mask = slots - 1;
	}

	get size(): number {
		return this.count;
	}

	/** Bytes the table holds (for the documentation's figures and the tests). */
	get bytes(): number {
		return this.table.byteLength;
	}

	has(hi: number, lo: number): boolean {
		if (hi === 0 && lo === 0) lo = 1;
		const t = this.table;
		for (let i = lo & this.mask; ; i = (i + 1) & this.mask) {
			const h = t[i * 2];
			const l = t[i * 2 + 1];
			if (h === 0 && l === 0) return false;
			if (h === hi && l === lo) return true;
		}
	}

	/** True when the value was not there yet. */
	add(hi: number, lo: number): boolean {
		if (hi === 0 && lo === 0) lo = 1;
		if ((this.count + 1) * 2 > this.mask + 1) this.grow();
		const t = this.table;
		for (let i = lo & this.mask; ; i = (i + 1) & this.mask) {
			const h = t[i * 2];
			const l = t[i * 2 + 1];
			if (h === hi && l === lo) return false;
			if (h === 0 && l === 0) {
				t[i * 2] = hi;
				t[i * 2 + 1] = lo;
				this.count++;
				return true;
			}
		}
	}

	private grow(): void {
		const old = this.table;
		this.table = new Uint32Array(old.length * 2);
		this.mask = old.length - 1;
		this.count = 0;
		for (let i = 0; i < old.length; i += 2) if (old[i] !== 0 || old[i + 1] !== 0) this.add(old[i], old[i + 1]);
	}
}

/** The two halves of a hex digest's first 64 bits (16 hex digits). */
export function prefixOf(hexDigest: string): [number, number] {
	return [parseInt(hexDigest.slice(0, 8), 16) >>> 0, parseInt(hexDigest.slice(8, 16), 16) >>> 0];
}

/** Where the live credentials are read from (the owning service's repo). Prefixes are the first 16 hex digits of the digest. */
export interface KnownCredentialsSource {
	/** Live credentials with a primary key after `afterId` (all when null), in key order, at most `limit`. */
	livePage(afterId: string | null, limit: number): Promise<Array<{ id: string; prefix: string }>>;
	/** Prefixes of live credentials created at or after `since` (the database's clock). */
	createdSince(since: Date): Promise<string[]>;
	/** The database's clock. */
	now(): Promise<Date>;
}

export interface KnownCredentialsOptions {
	source: KnownCredentialsSource;
	/** At most this many credentials are kept; past it every credential is looked up (see above). */
	max: number;
	/** Re-read of the rows created since the last read, in ms (0: only on events). */
	refreshMs: number;
	/** Full re-read, in ms (0: only on revocations). */
	reloadMs: number;
	/** What the set's owner calls them in its logs ("API keys", "driver tokens"). */
	what: string;
	log: { info(msg: string): void; warn(msg: string): void };
}

/** Fixed: rows of a full read fetched per statement. */
const PAGE = 5_000;
/**
 * A row's created_at is its transaction's start, so a row may commit after a
 * read that began later than its created_at: each re-read goes back this far
 * behind the previous one (re-adding a prefix is free).
 */
const OVERLAP_MS = 60_000;

export class KnownCredentials {
	private set: PrefixSet | null = null;
	/** Being filled by a full read: what `add` adds goes here too. */
	private building: PrefixSet | null = null;
	private complete = false;
	private watermark = new Date(0);
	/** Reads run one at a time, in order; a read asked for while the same kind waits is that one. */
	private chain: Promise<void> = Promise.resolve();
	private waiting: { refresh?: Promise<void>; reload?: Promise<void> } = {};
	private timers: NodeJS.Timeout[] = [];
	private stopped = false;

	constructor(private readonly o: KnownCredentialsOptions) {}

	/** Loaded and complete: a prefix missing from the set is certainly not a live credential. */
	get ready(): boolean {
		return this.set !== null && this.complete;
	}

	get size(): number {
		return this.set?.size ?? 0;
	}

	/** Memory the set holds now, in bytes. */
	get bytes(): number {
		return (this.set?.bytes ?? 0) + (this.building?.bytes ?? 0);
	}

	/** False only when no live credential has this digest's prefix (so a lookup would find nothing). */
	mayBeLive(hexDigest: string): boolean {
		if (!this.ready) return true;
		const [hi, lo] = prefixOf(hexDigest);
		return this.set!.has(hi, lo);
	}

	/** A credential this instance just created. */
	add(hexDigest: string): void {
		const [hi, lo] = prefixOf(hexDigest);
		this.put(this.set, hi, lo);
		this.put(this.building, hi, lo);
	}

	/** The first full read, then the timers. Resolves once the set is loaded (or failed to: it then answers "may be live"). */
	async start(): Promise<void> {
		await this.reload();
		const every = (ms: number, fn: () => Promise<void>) => {
			if (ms <= 0) return;
			const timer = setInterval(() => void fn(), ms);
			timer.unref();
			this.timers.push(timer);
		};
		every(this.o.refreshMs, () => this.refresh());
		every(this.o.reloadMs, () => this.reload());
	}

	stop(): void {
		this.stopped = true;
		for (const t of this.timers) clearInterval(t);
		this.timers = [];
	}

	/** Adds what was created since the last read (another instance or an operator's CLI created credentials). */
	refresh(): Promise<void> {
		return this.enqueue("refresh", async () => {
			if (this.set === null) return this.readAll();
			const started = await this.o.source.now();
			const prefixes = await this.o.source.createdSince(this.watermark);
			for (const p of prefixes) this.add(p);
			this.watermark = new Date(started.getTime() - OVERLAP_MS);
		});
	}

	/** Reads every live credential again (drops revoked ones). */
	reload(): Promise<void> {
		return this.enqueue("reload", () => this.readAll());
	}

	private put(set: PrefixSet | null, hi: number, lo: number): void {
		if (set === null || set.has(hi, lo)) return;
		if (set.size >= this.o.max) {
			if (set === this.set && this.complete) {
				this.complete = false;
				this.o.log.warn(`More than ${this.o.max} live ${this.o.what}: every unknown one is looked up until a full read fits again`);
			}
			return;
		}
		set.add(hi, lo);
	}

	private async readAll(): Promise<void> {
		const started = await this.o.source.now();
		const building = (this.building = new PrefixSet(this.set?.size ?? 0));
		let fits = true;
		try {
			for (let after: string | null = null; ;) {
				if (this.stopped) return;
				const page = await this.o.source.livePage(after, PAGE);
				for (const row of page) {
					if (building.size >= this.o.max) fits = false;
					else building.add(...prefixOf(row.prefix));
				}
				if (page.length < PAGE) break;
				after = page[page.length - 1].id;
			}
		} finally {
			this.building = null;
		}
		const first = this.set === null;
		this.set = building;
		this.complete = fits;
		this.watermark = new Date(started.getTime() - OVERLAP_MS);
		if (!fits) this.o.log.warn(`More than ${this.o.max} live ${this.o.what}: every unknown one is looked up`);
		else if (first) this.o.log.info(`Known ${this.o.what}: ${building.size} (${Math.ceil(building.bytes / 1024)} KiB)`);
	}

	private enqueue(kind: "refresh" | "reload", fn: () => Promise<void>): Promise<void> {
		const pending = this.waiting[kind];
		if (pending) return pending;
		const run = this.chain.then(async () => {
			this.waiting[kind] = undefined;
			if (this.stopped) return;
			try {
				await fn();
			} catch (err) {
				// The set stays as it was; the next event or timer tries again.
				this.o.log.warn(`Could not read the live ${this.o.what}: ${(err as Error)?.name ?? "error"}`);
			}
		});
		this.waiting[kind] = run;
		this.chain = run;
		return run;
	}
}

export interface KnownCredentialsSettings {
	/** KNOWN_CREDENTIALS_MAX: live credentials kept at most per service instance (16 bytes each at most). */
	max: number;
	/** KNOWN_CREDENTIALS_REFRESH_MS: re-read of newly created credentials (events make it immediate; this is the safety net). */
	refreshMs: number;
	/** KNOWN_CREDENTIALS_RELOAD_MS: full re-read, which drops revoked credentials. */
	reloadMs: number;
}

/** The same three settings for every service that keeps a set (partners, dispatch). */
export function readKnownCredentialsSettings(env: Env): KnownCredentialsSettings {
	return {
		max: envInt(env, "KNOWN_CREDENTIALS_MAX", 1_000_000, 1),
		refreshMs: envInt(env, "KNOWN_CREDENTIALS_REFRESH_MS", 10_000, 0),
		reloadMs: envInt(env, "KNOWN_CREDENTIALS_RELOAD_MS", 3_600_000, 0),
	};
}
