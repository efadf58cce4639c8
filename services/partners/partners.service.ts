import type { Context, Service, ServiceSchema } from "moleculer";
import { QueryTypes } from "sequelize";
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
	type SigningSecretParams,
} from "../../contracts/partners";
import { migrations } from "./migrations";

/** Partners: who may call the API, and the secret their webhooks are signed with. */

interface PartnerRow {
	id: string;
	name: string;
	webhook_secret: string;
	created_at: Date;
	disabled_at: Date | null;
}

interface PartnersSettings {
	/** How long a resolved key is trusted without asking the database again. */
	authCacheMs: number;
}

interface PartnersMethods {
	insertPartner(name: string, apiKey: string, webhookSecret: string): Promise<string | null>;
}

interface PartnersLocal {
	authCache: Map<string, { value: AuthenticatedPartner | null; expires: number }>;
}

type PartnersThis = Service<PartnersSettings> & PartnersMethods & PartnersLocal & DbThis;

const PartnersService: ServiceSchema<PartnersSettings, PartnersMethods, PartnersLocal & DbThis> = {
	name: "partners",
	mixins: [DbMixin({ service: "partners", migrations })],
	settings: { authCacheMs: 30_000 },

	actions: {
		/** Creates a partner; the API key is returned only here. REPL: `call partners.create --name Acme` */
		create: {
			access: "internal",
			params: createPartnerParams,
			async handler(this: PartnersThis, ctx: Context<CreatePartnerParams>): Promise<CreatedPartner> {
				const apiKey = ctx.params.apiKey ?? newApiKey();
				const webhookSecret = ctx.params.webhookSecret ?? newWebhookSecret();
				if (!isWebhookSecret(webhookSecret)) {
					throw new ApiError(400, "VALIDATION_ERROR", "webhookSecret must be whsec_ + base64 of at least 24 bytes", {
						details: [{ field: "webhookSecret", message: "must be whsec_ + base64 of at least 24 bytes" }],
					});
				}
				const partnerId = await this.insertPartner(ctx.params.name, apiKey, webhookSecret);
				if (!partnerId) throw new ApiError(409, "CONFLICT", "That API key is already in use");
				return { partnerId, apiKey, webhookSecret };
			},
		},

		/** Resolves an API key to its partner, or null. Called by the gateway on every request. */
		authenticate: {
			access: "internal",
			params: authenticateParams,
			async handler(this: PartnersThis, ctx: Context<AuthenticateParams>): Promise<AuthenticatedPartner | null> {
				const hash = hashApiKey(ctx.params.apiKey);
				const now = Date.now();
				const cached = this.authCache.get(hash);
				if (cached && cached.expires > now) return cached.value;
				const rows = await this.sequelize.query<PartnerRow>(
					"SELECT id, name FROM partners WHERE api_key_hash = $1 AND disabled_at IS NULL",
					{ bind: [hash], type: QueryTypes.SELECT },
				);
				const value = rows[0] ? { partnerId: rows[0].id, name: rows[0].name } : null;
				if (this.authCache.size > 10_000) this.authCache.clear();
				this.authCache.set(hash, { value, expires: now + this.settings.authCacheMs });
				return value;
			},
		},

		/** The partner's webhook signing secret (notifications signs every delivery with it). */
		signingSecret: {
			access: "internal",
			params: signingSecretParams,
			async handler(this: PartnersThis, ctx: Context<SigningSecretParams>): Promise<PartnerSigning> {
				const rows = await this.sequelize.query<PartnerRow>("SELECT id, webhook_secret FROM partners WHERE id = $1", {
					bind: [ctx.params.partnerId],
					type: QueryTypes.SELECT,
				});
				if (!rows[0]) throw new ApiError(404, "NOT_FOUND", "Unknown partner");
				return { partnerId: rows[0].id, webhookSecret: rows[0].webhook_secret };
			},
		},

		/** Operators: every partner (never keys or secrets). REPL: `call partners.list` */
		list: {
			access: "internal",
			async handler(this: PartnersThis) {
				const rows = await this.sequelize.query<PartnerRow>(
					"SELECT id, name, created_at, disabled_at FROM partners ORDER BY created_at",
					{ type: QueryTypes.SELECT },
				);
				return rows.map((r) => ({ partnerId: r.id, name: r.name, createdAt: r.created_at, disabled: r.disabled_at !== null }));
			},
		},
	},

	methods: {
		async insertPartner(this: PartnersThis, name: string, apiKey: string, webhookSecret: string): Promise<string | null> {
			const id = newId("ptn");
			const rows = await this.sequelize.query<{ id: string }>(
				`INSERT INTO partners (id, name, api_key_hash, webhook_secret) VALUES ($1, $2, $3, $4)
				 ON CONFLICT (api_key_hash) DO NOTHING RETURNING id`,
				{ bind: [id, name, hashApiKey(apiKey), webhookSecret], type: QueryTypes.SELECT },
			);
			return rows[0]?.id ?? null;
		},
	},

	created(this: PartnersThis) {
		this.authCache = new Map();
	},

	/**
	 * BOOTSTRAP_PARTNER_KEY / BOOTSTRAP_WEBHOOK_SECRET (dev, compose, tests):
	 * make sure that partner exists; an explicit secret is kept in step.
	 */
	async started(this: PartnersThis) {
		const key = process.env.BOOTSTRAP_PARTNER_KEY;
		if (!key) return;
		const secret = process.env.BOOTSTRAP_WEBHOOK_SECRET;
		if (secret && !isWebhookSecret(secret)) throw new Error("BOOTSTRAP_WEBHOOK_SECRET must be whsec_ + base64 of at least 24 bytes");
		const created = await this.insertPartner("Bootstrap partner", key, secret ?? newWebhookSecret());
		if (!created && secret) {
			await this.sequelize.query("UPDATE partners SET webhook_secret = $2 WHERE api_key_hash = $1", {
				bind: [hashApiKey(key), secret],
			});
		}
		this.logger.info(created ? `Bootstrap partner ${created} created` : "Bootstrap partner present");
	},
};

export default PartnersService;
