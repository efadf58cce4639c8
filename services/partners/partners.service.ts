import type { Context, Service, ServiceSchema } from "moleculer";
import type { Transaction } from "sequelize";
import { DbMixin, type DbThis } from "../../mixins/db.mixin";
import { ApiError, validationError } from "../../lib/errors";
import { newId } from "../../lib/ids";
import { hashApiKey, isWebhookSecret, newWebhookSecret } from "../../lib/secrets";
import {
	announceParams,
	authenticateParams,
	createKeyParams,
	createPartnerParams,
	DEFAULT_KEY_MODE,
	DEFAULT_SIGNING_MODE,
	DEFAULT_WEBHOOK_SECRET_GRACE_SECONDS,
	listKeysParams,
	PARTNER_EVENTS,
	revokeKeyParams,
	rotateWebhookSecretParams,
	signingSecretParams,
	partnerAuditParams,
	type PartnerAuditParams,
	type ApiKeySummary,
	type AuthenticateParams,
	type AuthenticatedPartner,
	type CreatedKey,
	type CreatedPartner,
	type CreateKeyParams,
	type CreatePartnerParams,
	type KeyMode,
	type ListKeysParams,
	type PartnersChangedEvent,
	type PartnerSigning,
	type PartnerSummary,
	type RevokedKeys,
	type RevokeKeyParams,
	type RotatedWebhookSecret,
	type RotateWebhookSecretParams,
	type SigningSecretParams,
	setApiVersionParams,
	type ApiVersionPin,
	type SetApiVersionParams,
} from "../../contracts/partners";
import type { ApiVersionTable } from "../../contracts/versions";
import { apiVersionsOf, isKnownVersion, latestVersion, unknownVersion } from "../../lib/api-versions";
import { AuthCache, OncePer } from "../../lib/auth-cache";
import { readPartnersSettings, WEBHOOK_SECRET_RULE, type PartnersSettings } from "./partners.settings";
import { PartnersRepo, type RevokeOutcome } from "./partners.repo";
import { migrations } from "./migrations";
import { keyFor } from "./key-rules";
import { KnownCredentials } from "../../lib/known-credentials";
import { useServiceSettings } from "../../lib/settings";
import { actorOf, AuditLog, type Actor } from "../../lib/audit";
import type { AuditPage } from "../../contracts/audit";

/**
 * Partners: who may call the API (several API keys per partner, each
 * revocable), and the secrets their webhooks are signed with (rotated with a
 * grace period). Every action is for services and operators (the gateway,
 * notifications, the REPL and `npm run partner`), never mapped on the gateway.
 *
 * Every change broadcasts `partners.changed`: each partners instance drops its
 * auth cache and each notifications instance the partner's cached secrets.
 * Events are fire-and-forget, so the caches' TTL is the safety net.
 */

interface PartnersMethods {
	insertPartner(
		name: string,
		apiKey: string,
		webhookSecrets: Record<KeyMode, string>,
		mode: KeyMode,
		actor: Actor,
		detail?: Record<string, unknown>,
	): Promise<string | null>;
	broadcastChange(partnerId: string, what: PartnersChangedEvent["what"]): Promise<void>;
	revoked(outcome: RevokeOutcome, what: string): Promise<RevokedKeys>;
	bootstrap(): Promise<void>;
}

interface PartnersLocal {
	repo: PartnersRepo;
	/** Digest prefixes of every live key, for the gateway's throttled addresses (`onlyKnown`). */
	knownKeys: KnownCredentials;
	auditLog: AuditLog;
	authCache: AuthCache<AuthenticatedPartner>;
	touches: OncePer;
	/** The API versions this instance knows (contracts/versions.ts; a test may inject its own). */
	apiVersions: ApiVersionTable;
}

type PartnersThis = Service<PartnersSettings> & PartnersMethods & PartnersLocal & DbThis;

/**
 * Why BOOTSTRAP_PARTNER_MODE cannot apply to the existing bootstrap key, or
 * undefined: a key's mode is never changed by a restart (a test key turned
 * live would see live rides, and the reverse would strand them). Unset means
 * "whatever the key is".
 */
export function bootstrapModeConflict(existing: { partnerId: string; mode: KeyMode }, asked: KeyMode | undefined): string | undefined {
	if (asked === undefined || asked === existing.mode) return undefined;
	return (
		`BOOTSTRAP_PARTNER_MODE is ${asked}, but BOOTSTRAP_PARTNER_KEY is already a ${existing.mode} key of ${existing.partnerId}; ` +
		`a key's mode never changes. Set BOOTSTRAP_PARTNER_MODE=${existing.mode} (or unset it), or give a ${asked} key its own value ` +
		`(npm run partner -- rotate-key --partner ${existing.partnerId} --mode ${asked})`
	);
}

/** api_keys.last_used_at is written at most this often per key (per instance; the UPDATE skips fresher rows). */
const TOUCH_EVERY_MS = 60_000;

function checkWebhookSecret(webhookSecret: string): void {
	if (!isWebhookSecret(webhookSecret)) throw validationError("webhookSecret", `must be ${WEBHOOK_SECRET_RULE}`);
}

/** Each mode's signing secret of a new partner: `given` for `mode`, a generated one for the other. */
function secretsFor(mode: KeyMode, given: string): Record<KeyMode, string> {
	const secrets = { test: newWebhookSecret(), live: newWebhookSecret() };
	secrets[mode] = given;
	return secrets;
}

const PartnersService: ServiceSchema<PartnersSettings, PartnersMethods, PartnersLocal & DbThis> = {
	name: "partners",
	mixins: [DbMixin({ service: "partners", migrations })],

	actions: {
		/** Creates a partner with one key labelled "initial"; the API key is returned only here. REPL: `call partners.create --name Acme` */
		create: {
			access: "internal",
			params: createPartnerParams,
			async handler(this: PartnersThis, ctx: Context<CreatePartnerParams>): Promise<CreatedPartner> {
				const actor = actorOf(ctx);
				const mode = ctx.params.mode ?? DEFAULT_KEY_MODE;
				const apiKey = keyFor(mode, ctx.params.apiKey);
				const webhookSecret = ctx.params.webhookSecret ?? newWebhookSecret();
				checkWebhookSecret(webhookSecret);
				const webhookSecrets = secretsFor(mode, webhookSecret);
				const partnerId = await this.insertPartner(ctx.params.name, apiKey, webhookSecrets, mode, actor, {
					apiKeyGiven: ctx.params.apiKey !== undefined,
					webhookSecretGiven: ctx.params.webhookSecret !== undefined,
				});
				if (!partnerId) throw new ApiError("CONFLICT", "That API key is already in use");
				this.knownKeys.add(hashApiKey(apiKey));
				// A miss for this key may be cached somewhere.
				await this.broadcastChange(partnerId, "keys");
				return { partnerId, apiKey, webhookSecret, webhookSecrets };
			},
		},

		/**
		 * Resolves an API key to its partner, or null (unknown, revoked key,
		 * revoked partner). Called by the gateway on every request. With
		 * `onlyKnown` (the caller's address is throttled) a key whose digest
		 * prefix no live key has is answered null without a database lookup.
		 */
		authenticate: {
			access: "internal",
			params: authenticateParams,
			async handler(this: PartnersThis, ctx: Context<AuthenticateParams>): Promise<AuthenticatedPartner | null> {
				const hash = hashApiKey(ctx.params.apiKey);
				const cached = this.authCache.get(hash);
				let value: AuthenticatedPartner | null;
				if (cached) {
					value = cached.value;
				} else if (ctx.params.onlyKnown && !this.knownKeys.mayBeLive(hash)) {
					// Not cached: nothing was looked up.
					return null;
				} else {
					const generation = this.authCache.generation;
					value = await this.repo.findByKeyHash(hash);
					this.authCache.set(hash, value, generation);
				}
				if (value && this.touches.take(hash)) {
					// Off the request's path; a lost update only makes last_used_at a minute older.
					this.repo.touchKey(hash).catch((err: unknown) => this.logger.warn(`Could not record a key's last use: ${(err as Error)?.name ?? "error"}`));
				}
				return value;
			},
		},

		/** The partner's webhook signing secrets of one mode (notifications signs every delivery of a ride of that mode with each one still valid). */
		signingSecret: {
			access: "internal",
			params: signingSecretParams,
			async handler(this: PartnersThis, ctx: Context<SigningSecretParams>): Promise<PartnerSigning> {
				const mode = ctx.params.mode ?? DEFAULT_SIGNING_MODE;
				const [secrets, apiVersion] = await Promise.all([
					this.repo.signingSecrets(ctx.params.partnerId, mode, this.settings.sharedSecretTestTransitionDays),
					this.repo.apiVersion(ctx.params.partnerId),
				]);
				// Empty: an unknown partner. (A partner an instance of the previous version created during a rollout
				// has only a `shared` secret: for test it has an end but still signs until then.)
				if (secrets.length === 0) throw new ApiError("NOT_FOUND", "Unknown partner");
				return { partnerId: ctx.params.partnerId, mode, webhookSecrets: secrets, apiVersion };
			},
		},

		/** Operators: every partner (never keys or secrets). REPL: `call partners.list` */
		list: {
			access: "internal",
			handler(this: PartnersThis): Promise<PartnerSummary[]> {
				return this.repo.list();
			},
		},

		/** Operators: keys with label, last use and revocation (never the keys). REPL: `call partners.listKeys --partnerId ptn_…` */
		listKeys: {
			access: "internal",
			params: listKeysParams,
			handler(this: PartnersThis, ctx: Context<ListKeysParams>): Promise<ApiKeySummary[]> {
				return this.repo.listKeys(ctx.params.partnerId);
			},
		},

		/** Operators (rotate-key): one more key; the partner's other keys keep working until revoked. */
		createKey: {
			access: "internal",
			params: createKeyParams,
			async handler(this: PartnersThis, ctx: Context<CreateKeyParams>): Promise<CreatedKey> {
				const { partnerId, label } = ctx.params;
				const actor = actorOf(ctx);
				const mode = ctx.params.mode ?? DEFAULT_KEY_MODE;
				const apiKey = keyFor(mode, ctx.params.apiKey);
				const keyId = newId("key");
				const outcome = await this.repo.insertKey(partnerId, keyId, hashApiKey(apiKey), label, mode, (t) =>
					this.auditLog.record(
						{
							actor,
							action: "partners.createKey",
							subject: partnerId,
							target: keyId,
							detail: { label, mode, apiKeyGiven: ctx.params.apiKey !== undefined },
						},
						t,
					),
				);
				if (outcome === "missing") throw new ApiError("NOT_FOUND", "Unknown partner");
				if (outcome === "revoked") throw new ApiError("CONFLICT", "That partner is revoked");
				if (outcome === "taken") throw new ApiError("CONFLICT", "That API key is already in use");
				this.knownKeys.add(hashApiKey(apiKey));
				await this.broadcastChange(partnerId, "keys");
				return { keyId, partnerId, label, apiKey };
			},
		},

		/** Operators: revokes one key (keyId) or a whole partner and all its keys (partnerId). Permanent. */
		revokeKey: {
			access: "internal",
			params: revokeKeyParams,
			async handler(this: PartnersThis, ctx: Context<RevokeKeyParams>): Promise<RevokedKeys> {
				const { keyId, partnerId } = ctx.params;
				if ((keyId === undefined) === (partnerId === undefined)) throw validationError("keyId", "give exactly one of keyId or partnerId");
				const actor = actorOf(ctx);
				const audit = (t: Transaction, outcome: RevokeOutcome) =>
					outcome.found
						? this.auditLog.record(
								{
									actor,
									action: "partners.revokeKey",
									subject: outcome.partnerId,
									target: keyId ?? null,
									detail: { revokedKeyIds: outcome.revokedKeyIds, partnerRevoked: outcome.partnerRevoked },
								},
								t,
							)
						: Promise.resolve();
				if (keyId !== undefined) return this.revoked(await this.repo.revokeKey(keyId, audit), "key");
				return this.revoked(await this.repo.revokePartner(partnerId!, audit), "partner");
			},
		},

		/** Operators: a new signing secret of one mode; the mode's old one keeps signing too until the grace period ends. */
		rotateWebhookSecret: {
			access: "internal",
			params: rotateWebhookSecretParams,
			async handler(this: PartnersThis, ctx: Context<RotateWebhookSecretParams>): Promise<RotatedWebhookSecret> {
				const { partnerId, mode } = ctx.params;
				const actor = actorOf(ctx);
				const webhookSecret = ctx.params.webhookSecret ?? newWebhookSecret();
				checkWebhookSecret(webhookSecret);
				const grace = ctx.params.graceSeconds ?? DEFAULT_WEBHOOK_SECRET_GRACE_SECONDS;
				const rotated = await this.repo.rotateWebhookSecret(
					partnerId,
					mode,
					webhookSecret,
					grace,
					this.settings.sharedSecretTestTransitionDays,
					(t, r) =>
						this.auditLog.record(
							{
								actor,
								action: "partners.rotateWebhookSecret",
								subject: partnerId,
								detail: {
									mode,
									graceSeconds: grace,
									previousValidUntil: r.previousValidUntil,
									webhookSecretGiven: ctx.params.webhookSecret !== undefined,
								},
							},
							t,
						),
				);
				if (!rotated) throw new ApiError("NOT_FOUND", "Unknown partner");
				await this.broadcastChange(partnerId, "webhookSecret");
				this.logger.info(`${mode} webhook secret of ${partnerId} rotated; the previous one signs until ${rotated.previousValidUntil}`);
				return { partnerId, mode, webhookSecret, previousValidUntil: rotated.previousValidUntil };
			},
		},

		/**
		 * Operators: pins the partner to another API version (`npm run partner -- set-version`). Its requests
		 * without a `Ride-Version` header and its webhooks use it from the next request and delivery on:
		 * every gateway and notifications instance drops what it cached of the partner (partners.changed).
		 */
		setApiVersion: {
			access: "internal",
			params: setApiVersionParams,
			async handler(this: PartnersThis, ctx: Context<SetApiVersionParams>): Promise<ApiVersionPin> {
				const { partnerId, apiVersion } = ctx.params;
				if (!isKnownVersion(this.apiVersions, apiVersion)) throw unknownVersion(this.apiVersions, apiVersion, "apiVersion");
				const actor = actorOf(ctx);
				const previous = await this.repo.setApiVersion(partnerId, apiVersion, (t, from) =>
					this.auditLog.record({ actor, action: "partners.setApiVersion", subject: partnerId, detail: { from, to: apiVersion } }, t),
				);
				if (previous === null) throw new ApiError("NOT_FOUND", "Unknown partner");
				await this.broadcastChange(partnerId, "apiVersion");
				this.logger.info(`API version of ${partnerId}: ${previous} → ${apiVersion}`);
				return { partnerId, apiVersion, previousApiVersion: previous };
			},
		},

		/** Operators: the audit trail of changes to partners, keys and secrets, newest first. `npm run partner -- audit`; REPL: `call partners.audit --partnerId ptn_…` */
		audit: {
			access: "internal",
			params: partnerAuditParams,
			handler(this: PartnersThis, ctx: Context<PartnerAuditParams>): Promise<AuditPage> {
				return this.auditLog.page(ctx.params.partnerId, ctx.params.limit, ctx.params.before);
			},
		},

		/** `npm run partner` changed the database from its private broker: tell every instance. */
		announce: {
			access: "internal",
			params: announceParams,
			async handler(this: PartnersThis, ctx: Context<PartnersChangedEvent>): Promise<{ announced: true }> {
				await this.broadcastChange(ctx.params.partnerId, ctx.params.what);
				return { announced: true };
			},
		},
	},

	events: {
		/**
		 * Any instance changed keys or a partner: forget every cached answer
		 * (rare; the cache refills from the database), and read the keys
		 * created meanwhile (a revoked partner: every live key again).
		 */
		[PARTNER_EVENTS.changed](this: PartnersThis, ctx: Context<PartnersChangedEvent>) {
			this.authCache.clear();
			void (ctx.params?.what === "partner" ? this.knownKeys.reload() : this.knownKeys.refresh());
		},
	},

	methods: {
		/** The new partner's id, or null when that API key is already in use. */
		insertPartner(
			this: PartnersThis,
			name: string,
			apiKey: string,
			webhookSecrets: Record<KeyMode, string>,
			mode: KeyMode,
			actor: Actor,
			detail: Record<string, unknown> = {},
		): Promise<string | null> {
			const keyId = newId("key");
			return this.repo.insertPartner(
				// Pinned to the version current now, when its first key is made.
				{
					partnerId: newId("ptn"),
					name,
					keyId,
					keyHash: hashApiKey(apiKey),
					label: "initial",
					mode,
					apiVersion: latestVersion(this.apiVersions),
					webhookSecrets,
				},
				(t, partnerId) =>
					this.auditLog.record({ actor, action: "partners.create", subject: partnerId, target: keyId, detail: { name, mode, ...detail } }, t),
			);
		},

		/**
		 * Every instance (this one included) drops what it cached about the
		 * partner. Keys created elsewhere (`npm run partner` announces them
		 * here) are known to this instance before the broadcast leaves.
		 */
		async broadcastChange(this: PartnersThis, partnerId: string, what: PartnersChangedEvent["what"]): Promise<void> {
			this.authCache.clear();
			if (what === "keys") await this.knownKeys.refresh();
			await this.broker.broadcast(PARTNER_EVENTS.changed, { partnerId, what } satisfies PartnersChangedEvent);
		},

		async revoked(this: PartnersThis, outcome: RevokeOutcome, what: string): Promise<RevokedKeys> {
			if (!outcome.found) throw new ApiError("NOT_FOUND", `Unknown ${what}`);
			const { partnerId, revokedKeyIds, partnerRevoked } = outcome;
			await this.broadcastChange(partnerId, partnerRevoked ? "partner" : "keys");
			this.logger.info(`Revoked ${what === "partner" ? `partner ${partnerId} and` : ""} ${revokedKeyIds.length} key(s) of ${partnerId}`);
			return { partnerId, revokedKeyIds, partnerRevoked };
		},

		/**
		 * BOOTSTRAP_PARTNER_KEY / BOOTSTRAP_WEBHOOK_SECRET (dev, compose, tests):
		 * make sure that partner exists; an explicit secret is kept in step as
		 * the secret of the key's mode (BOOTSTRAP_PARTNER_MODE). A
		 * key or partner an operator revoked stays revoked (a warning says so).
		 * A key's mode never changes: BOOTSTRAP_PARTNER_MODE naming the other
		 * mode than the existing key's refuses to start (bootstrapModeConflict).
		 */
		async bootstrap(this: PartnersThis): Promise<void> {
			const { bootstrapPartnerKey: key, bootstrapWebhookSecret: secret, bootstrapPartnerMode: asked } = this.settings;
			if (!key) return;
			const state = await this.repo.keyState(hashApiKey(key));
			if (state?.revoked) {
				this.logger.warn(`BOOTSTRAP_PARTNER_KEY belongs to ${state.partnerId}, revoked by an operator: left revoked, not re-created`);
				return;
			}
			if (state) {
				const conflict = bootstrapModeConflict(state, asked);
				if (conflict) throw new Error(conflict);
				// The secret of the key's own mode is the one kept in step.
				if (secret && (await this.repo.setCurrentSecret(state.partnerId, state.mode, secret)))
					await this.broadcastChange(state.partnerId, "webhookSecret");
				this.logger.info(`Bootstrap partner ${state.partnerId} present (${state.mode} key)`);
				return;
			}
			const mode = asked ?? DEFAULT_KEY_MODE;
			const created = await this.insertPartner("Bootstrap partner", key, secretsFor(mode, secret ?? newWebhookSecret()), mode, {
				operator: "bootstrap",
				via: this.broker.nodeID,
			});
			if (created) this.knownKeys.add(hashApiKey(key));
			// null: another instance created it at the same moment.
			this.logger.info(created ? `Bootstrap partner ${created} created (${mode} key)` : "Bootstrap partner present");
		},
	},

	created(this: PartnersThis) {
		useServiceSettings(this, readPartnersSettings);
		this.apiVersions = apiVersionsOf(this);
		this.authCache = new AuthCache(this.settings.authCacheMs);
		this.touches = new OncePer(TOUCH_EVERY_MS);
		// The DB mixin's `created` ran first and acquired the pool.
		const repo = (this.repo = new PartnersRepo(this.db));
		this.knownKeys = new KnownCredentials({
			source: { livePage: (after, limit) => repo.livePrefixes(after, limit), createdSince: (since) => repo.prefixesSince(since), now: () => repo.now() },
			...this.settings.knownKeys,
			what: "API keys",
			log: this.logger,
		});
		this.auditLog = new AuditLog(this.db, "partners_audit");
	},

	async started(this: PartnersThis) {
		// Runs after the DB mixin's `started`, so the tables exist.
		await this.bootstrap();
		await this.knownKeys.start();
	},

	stopped(this: PartnersThis) {
		this.knownKeys.stop();
	},
};

export default PartnersService;
