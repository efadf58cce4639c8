import type { Context, Service, ServiceSchema, ServiceSettingSchema } from "moleculer";
import { DbMixin, type DbThis } from "../../mixins/db.mixin";
import { ApiError } from "../../lib/errors";
import { newId } from "../../lib/ids";
import { hashApiKey, isWebhookSecret, newApiKey, newWebhookSecret } from "../../lib/secrets";
import {
	authenticateParams,
	createPartnerParams,
	signingSecretParams,
	type AuthenticateParams,
	type AuthenticatedPartner,
	type CreatedPartner,
	type CreatePartnerParams,
	type PartnerSigning,
	type PartnerSummary,
	type SigningSecretParams,
} from "../../contracts/partners";
import { AuthCache } from "./auth-cache";
import { readPartnersSettings, WEBHOOK_SECRET_RULE, type PartnersSettings } from "./partners.settings";
import { PartnersRepo } from "./partners.repo";
import { migrations } from "./migrations";
import { serviceEnv } from "../../lib/settings";

/**
 * Partners: who may call the API, and the secret their webhooks are signed
 * with. Every action is for services and operators (the gateway, notifications,
 * the REPL and `npm run partner`), never mapped on the gateway.
 */

interface PartnersMethods {
	insertPartner(name: string, apiKey: string, webhookSecret: string): Promise<string | null>;
}

interface PartnersLocal {
	cfg: PartnersSettings;
	repo: PartnersRepo;
	authCache: AuthCache<AuthenticatedPartner | null>;
}

type PartnersThis = Service & PartnersMethods & PartnersLocal & DbThis;

const INTERNAL = { access: "internal", visibility: "public" } as const;

const PartnersService: ServiceSchema<ServiceSettingSchema, PartnersMethods, PartnersLocal & DbThis> = {
	name: "partners",
	mixins: [DbMixin({ service: "partners", migrations })],

	actions: {
		/** Creates a partner; the API key is returned only here. REPL: `call partners.create --name Acme` */
		create: {
			...INTERNAL,
			params: createPartnerParams,
			async handler(this: PartnersThis, ctx: Context<CreatePartnerParams>): Promise<CreatedPartner> {
				const apiKey = ctx.params.apiKey ?? newApiKey();
				const webhookSecret = ctx.params.webhookSecret ?? newWebhookSecret();
				if (!isWebhookSecret(webhookSecret)) {
					throw new ApiError(400, "VALIDATION_ERROR", `webhookSecret must be ${WEBHOOK_SECRET_RULE}`, {
						details: [{ field: "webhookSecret", message: `must be ${WEBHOOK_SECRET_RULE}` }],
					});
				}
				const partnerId = await this.insertPartner(ctx.params.name, apiKey, webhookSecret);
				if (!partnerId) throw new ApiError(409, "CONFLICT", "That API key is already in use");
				return { partnerId, apiKey, webhookSecret };
			},
		},

		/** Resolves an API key to its partner, or null. Called by the gateway on every request. */
		authenticate: {
			...INTERNAL,
			params: authenticateParams,
			async handler(this: PartnersThis, ctx: Context<AuthenticateParams>): Promise<AuthenticatedPartner | null> {
				const hash = hashApiKey(ctx.params.apiKey);
				const now = Date.now();
				const cached = this.authCache.get(hash, now);
				if (cached) return cached.value;
				const value = await this.repo.findByKeyHash(hash);
				this.authCache.set(hash, value, now);
				return value;
			},
		},

		/** The partner's webhook signing secret (notifications signs every delivery with it). */
		signingSecret: {
			...INTERNAL,
			params: signingSecretParams,
			async handler(this: PartnersThis, ctx: Context<SigningSecretParams>): Promise<PartnerSigning> {
				const signing = await this.repo.signingSecret(ctx.params.partnerId);
				if (!signing) throw new ApiError(404, "NOT_FOUND", "Unknown partner");
				return signing;
			},
		},

		/** Operators: every partner (never keys or secrets). REPL: `call partners.list` */
		list: {
			...INTERNAL,
			handler(this: PartnersThis): Promise<PartnerSummary[]> {
				return this.repo.list();
			},
		},
	},

	methods: {
		/** The new partner's id, or null when that API key is already in use. */
		insertPartner(this: PartnersThis, name: string, apiKey: string, webhookSecret: string): Promise<string | null> {
			return this.repo.insert(newId("ptn"), name, hashApiKey(apiKey), webhookSecret);
		},
	},

	created(this: PartnersThis) {
		// Bad settings stop the start-up here, with a message that names the setting.
		this.cfg = readPartnersSettings(serviceEnv(this));
		this.authCache = new AuthCache(this.cfg.authCacheMs);
		// The DB mixin's `created` ran first and acquired the pool.
		this.repo = new PartnersRepo(this.sequelize);
	},

	/**
	 * BOOTSTRAP_PARTNER_KEY / BOOTSTRAP_WEBHOOK_SECRET (dev, compose, tests):
	 * make sure that partner exists; an explicit secret is kept in step.
	 */
	async started(this: PartnersThis) {
		// Runs after the DB mixin's `started`, so the partners table exists.
		const { bootstrapPartnerKey: key, bootstrapWebhookSecret: secret } = this.cfg;
		if (!key) return;
		const created = await this.insertPartner("Bootstrap partner", key, secret ?? newWebhookSecret());
		if (!created && secret) await this.repo.setWebhookSecretByKeyHash(hashApiKey(key), secret);
		this.logger.info(created ? `Bootstrap partner ${created} created` : "Bootstrap partner present");
	},
};

export default PartnersService;
