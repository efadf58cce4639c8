import { randomBytes } from "node:crypto";
import type { Context, Service, ServiceSchema, ServiceSettingSchema } from "moleculer";
import { QueryTypes } from "sequelize";
import { DbMixin, type DbThis } from "../../mixins/db.mixin";
import type { PartnerMeta } from "../../mixins/access.middleware";
import { ApiError, type ErrorDetail } from "../../lib/errors";
import type { LatLng } from "../../lib/geo";
import { SERVICE_TYPES, type ServiceType } from "../../contracts/common";
import {
	estimateParams,
	quoteParams,
	verifyQuoteParams,
	type EstimateParams,
	type EstimateResult,
	type PricedTrip,
	type Quote,
	type QuoteParams,
	type SupplyDemandReply,
	type VerifyQuoteParams,
} from "../../contracts/pricing";
import { breakdownOf, computeFare, surgeTenths, toMajor, type SurgePolicy } from "./fare";
import { readPricingSettings, type PricingSettings } from "./pricing.settings";
import { createRouteEstimator, type RouteEstimate, type RouteEstimator } from "./routing";
import { encodeQuote, verifyQuote, QuoteKeyring, type QuotedFare } from "./quote-token";
import { fetchSupplyDemand, SupplyCache, UNKNOWN_REPLY } from "./supply";
import { routedDistanceProblems, straightLineProblems } from "./trip";
import { migrations } from "./migrations";

/**
 * Pricing: fare estimates, quote tokens and the price of a trip. Nothing is
 * written per request (quote ids are signed tokens) and nothing is read from
 * the database per request (the signing secret is loaded once at start).
 */

const SUPPLY_DEMAND_ACTION = "dispatch.supplyDemand";
type EndpointList = { hasAvailable(): boolean };

/** The one row of `pricing_secrets` holding the generated quote signing secret. */
const SIGNING_SECRET_NAME = "quote-signing";

interface PricingMethods {
	checkTrip(pickup: LatLng, drop: LatLng): void;
	route(pickup: LatLng, drop: LatLng, serviceType: ServiceType): Promise<RouteEstimate>;
	supplyNear(ctx: Context, pickup: LatLng): Promise<SupplyDemandReply>;
	loadSigningSecret(): Promise<string>;
}

interface PricingLocal {
	cfg: PricingSettings;
	policy: SurgePolicy;
	router: RouteEstimator;
	keyring: QuoteKeyring | undefined;
	supplyCache: SupplyCache;
	/** Injectable clock (ms); tests of expiry replace it. */
	now: () => number;
	lastSupplyWarning: number;
}

type PricingThis = Service & PricingMethods & PricingLocal & DbThis;

function keyringOf(svc: PricingThis): QuoteKeyring {
	if (!svc.keyring) throw new ApiError(503, "SERVICE_UNAVAILABLE", "Pricing is starting", { retryAfter: 1 });
	return svc.keyring;
}

function validation(details: ErrorDetail[]): ApiError {
	return new ApiError(400, "VALIDATION_ERROR", details[0].message, { details });
}

const PricingService: ServiceSchema<ServiceSettingSchema, PricingMethods, PricingLocal & DbThis> = {
	name: "pricing",
	mixins: [DbMixin({ service: "pricing", migrations })],

	actions: {
		/** POST /ride/fare-estimate: one signed quote per service type (scooty first). */
		estimate: {
			access: "partner",
			params: estimateParams,
			async handler(this: PricingThis, ctx: Context<EstimateParams, PartnerMeta>): Promise<EstimateResult> {
				const partnerId = ctx.meta.partnerId!;
				const { pickup, drop } = ctx.params;
				this.checkTrip(pickup, drop);
				const keyring = keyringOf(this);
				const types: readonly ServiceType[] = ctx.params.serviceType ? [ctx.params.serviceType] : SERVICE_TYPES;
				const [routes, supply] = await Promise.all([
					Promise.all(types.map((t) => this.route(pickup, drop, t))),
					this.supplyNear(ctx, pickup),
				]);
				const now = this.now();
				const expiresAt = now + this.cfg.quoteTtlSeconds * 1000;
				const quotes = types.map((serviceType, i): Quote => {
					const { distance, duration } = routes[i];
					const s = supply[serviceType];
					const fare = computeFare(this.cfg.tariffs[serviceType], distance, duration, surgeTenths(s.demand, s.available, this.policy));
					const quoteId = encodeQuote({ partnerId, serviceType, pickup, drop, distance, duration, fare, expiresAt }, keyring);
					return {
						quoteId,
						serviceType,
						totalAmount: toMajor(fare.total),
						currency: fare.currency,
						eta: s.eta,
						expiresAt: new Date(expiresAt).toISOString(),
						fareBreakdown: breakdownOf(fare),
						distance,
						duration,
					};
				});
				return { distance: routes[0].distance, duration: routes[0].duration, quotes };
			},
		},

		/**
		 * create-order with a quoteId: the quoted price, if the quote is this
		 * partner's, for this service type and trip, and not expired.
		 */
		verifyQuote: {
			access: "partner",
			params: verifyQuoteParams,
			handler(this: PricingThis, ctx: Context<VerifyQuoteParams, PartnerMeta>): PricedTrip {
				const { quoteId, serviceType, pickup, drop } = ctx.params;
				const check = verifyQuote(quoteId, { partnerId: ctx.meta.partnerId!, serviceType, pickup, drop }, keyringOf(this), this.now(), this.cfg.quoteMatchRadiusMetres);
				if (!check.ok) {
					throw new ApiError(422, check.code, check.message, { details: [{ field: check.field ?? "quoteId", message: check.message }] });
				}
				const c = check.claims;
				return pricedTrip(c.serviceType, c.fare, c.distance, c.duration, quoteId);
			},
		},

		/** create-order without a quoteId: the trip at the current price. */
		quote: {
			access: "internal",
			params: quoteParams,
			async handler(this: PricingThis, ctx: Context<QuoteParams>): Promise<PricedTrip> {
				const { serviceType, pickup, drop } = ctx.params;
				this.checkTrip(pickup, drop);
				const [route, supply] = await Promise.all([this.route(pickup, drop, serviceType), this.supplyNear(ctx, pickup)]);
				const s = supply[serviceType];
				const fare = computeFare(this.cfg.tariffs[serviceType], route.distance, route.duration, surgeTenths(s.demand, s.available, this.policy));
				return pricedTrip(serviceType, fare, route.distance, route.duration);
			},
		},

		/** Operators: the tariffs in force (major units). REPL: `call pricing.tariffs` */
		tariffs: {
			access: "internal",
			handler(this: PricingThis) {
				const out: Record<string, unknown> = {};
				for (const type of SERVICE_TYPES) {
					const t = this.cfg.tariffs[type];
					out[type] = {
						currency: t.currency,
						baseFare: toMajor(t.baseFarePaise),
						perKm: toMajor(t.perKmPaise),
						perMinute: toMajor(t.perMinutePaise),
						minimumFare: toMajor(t.minimumFarePaise),
						taxPercent: t.taxBasisPoints / 100,
					};
				}
				return { tariffs: out, surgeMax: this.cfg.surgeMaxTenths / 10, quoteTtlSeconds: this.cfg.quoteTtlSeconds, maxTripKm: this.cfg.maxTripMetres / 1000 };
			},
		},
	},

	methods: {
		checkTrip(this: PricingThis, pickup: LatLng, drop: LatLng): void {
			const problems = straightLineProblems(pickup, drop, this.cfg);
			if (problems.length > 0) throw validation(problems);
		},

		async route(this: PricingThis, pickup: LatLng, drop: LatLng, serviceType: ServiceType): Promise<RouteEstimate> {
			const route = await this.router.estimate(pickup, drop, serviceType);
			const problems = routedDistanceProblems(route.distance, this.cfg);
			if (problems.length > 0) throw validation(problems);
			return route;
		},

		/**
		 * ETA and surge inputs from dispatch, cached briefly per ~100 m cell.
		 * Degrades to "unknown" (eta null, surge 1) when dispatch is absent,
		 * slow or failing: a quote without surge beats no quote.
		 */
		async supplyNear(this: PricingThis, ctx: Context, pickup: LatLng): Promise<SupplyDemandReply> {
			const now = Date.now();
			const cached = this.supplyCache.get(pickup, now);
			if (cached) return cached;
			// No dispatch node at all: answer at once instead of waiting for a "not found".
			const endpoints = this.broker.registry.getActionEndpoints(SUPPLY_DEMAND_ACTION) as EndpointList | undefined;
			if (!endpoints?.hasAvailable()) return UNKNOWN_REPLY;
			let failed = false;
			const reply = await fetchSupplyDemand(
				() => ctx.call<unknown, { point: LatLng }>(SUPPLY_DEMAND_ACTION, { point: { lat: pickup.lat, lng: pickup.lng } }, { timeout: this.cfg.supplyTimeoutMs }),
				this.cfg.supplyTimeoutMs,
				(err) => {
					failed = true;
					// One warning a minute is enough to notice; one per request would flood the log.
					if (now - this.lastSupplyWarning > 60_000) {
						this.lastSupplyWarning = now;
						this.logger.warn(`dispatch.supplyDemand unavailable, quoting without ETA and surge: ${(err as Error)?.message ?? err}`);
					}
				},
			);
			if (!failed) this.supplyCache.set(pickup, reply, now);
			return reply;
		},

		async loadSigningSecret(this: PricingThis): Promise<string> {
			if (this.cfg.signingSecret) return this.cfg.signingSecret;
			// Several instances may start together: the first insert wins and everyone reads the winner.
			await this.sequelize.query("INSERT INTO pricing_secrets (name, secret) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING", {
				bind: [SIGNING_SECRET_NAME, randomBytes(32).toString("base64url")],
			});
			const rows = await this.sequelize.query<{ secret: string }>("SELECT secret FROM pricing_secrets WHERE name = $1", {
				bind: [SIGNING_SECRET_NAME],
				type: QueryTypes.SELECT,
			});
			if (!rows[0]) throw new Error("pricing_secrets has no quote signing secret");
			return rows[0].secret;
		},
	},

	created(this: PricingThis) {
		// Bad settings stop the start-up here, with a message that names the setting.
		this.cfg = readPricingSettings(process.env);
		this.policy = { maxTenths: this.cfg.surgeMaxTenths, sensitivity: this.cfg.surgeSensitivity };
		this.router = createRouteEstimator(this.cfg);
		this.supplyCache = new SupplyCache(this.cfg.supplyCacheMs);
		this.now = () => Date.now();
		this.lastSupplyWarning = 0;
		this.keyring = undefined;
	},

	async started(this: PricingThis) {
		// Runs after the DB mixin's `started`, so pricing_secrets exists.
		const secret = await this.loadSigningSecret();
		this.keyring = new QuoteKeyring(secret, this.cfg.previousSigningSecrets);
		this.logger.info(`Quote signing key ${this.keyring.currentKid} (${this.cfg.signingSecret ? "QUOTE_SIGNING_SECRET" : "pricing_secrets"})`);
	},
};

function pricedTrip(serviceType: ServiceType, fare: QuotedFare, distance: number, duration: number, quoteId?: string): PricedTrip {
	const trip: PricedTrip = {
		serviceType,
		totalAmount: toMajor(fare.total),
		totalAmountPaise: fare.total,
		currency: fare.currency,
		fareBreakdown: breakdownOf(fare),
		distance,
		duration,
	};
	if (quoteId !== undefined) trip.quoteId = quoteId;
	return trip;
}

export default PricingService;
