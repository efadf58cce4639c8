import { randomBytes } from "node:crypto";
import type { Context, Service, ServiceSchema } from "moleculer";
import { DbMixin, type DbThis } from "../../mixins/db.mixin";
import type { PartnerCallMeta } from "../../contracts/gateway";
import type { KeyMode } from "../../contracts/partners";
import { ApiError, type ErrorDetail } from "../../lib/errors";
import { type Point, SERVICE_TYPES, type ServiceType } from "../../contracts/common";
import {
	estimateParams,
	quoteParams,
	verifyQuoteParams,
	type EstimateParams,
	type EstimateResult,
	type PricedTrip,
	type Quote,
	type QuoteParams,
	type TariffsReply,
	type VerifyQuoteParams,
} from "../../contracts/pricing";
import type { SupplyDemandReply } from "../../contracts/dispatch";
import { SERVICE_RETRY_AFTER_SECONDS } from "../../contracts/constants";
import { breakdownOf, computeFare, fareTerms, pricedTrip, surgeTenths, tariffView, toMajor, type FarePaise, type SurgePolicy } from "./fare";
import { readPricingSettings, type PricingSettings } from "./pricing.settings";
import { PricingRepo } from "./pricing.repo";
import { createRouteEstimator, type RouteEstimate, type RouteEstimator } from "./routing";
import { encodeQuote, verifyQuote, QuoteKeyring } from "./quote-token";
import { fetchSupplyDemand, SupplyCache, UNKNOWN_REPLY } from "./supply";
import { routedDistanceProblems, straightLineProblems } from "./trip";
import { migrations } from "./migrations";
import { useServiceSettings } from "../../lib/settings";
import { checkPickupAt } from "../../lib/schedule";

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
	pickupAtSeconds(pickupAt: string): number;
	checkTrip(pickup: Point, drop: Point): void;
	route(pickup: Point, drop: Point, serviceType: ServiceType): Promise<RouteEstimate>;
	fareOf(serviceType: ServiceType, route: RouteEstimate, supply: SupplyDemandReply): FarePaise;
	supplyNear(ctx: Context, pickup: Point): Promise<SupplyDemandReply>;
	loadSigningSecret(): Promise<string>;
}

interface PricingLocal {
	policy: SurgePolicy;
	router: RouteEstimator;
	repo: PricingRepo;
	keyring: QuoteKeyring | undefined;
	/** One per key mode: test and live see different drivers and demand. */
	supplyCaches: Record<KeyMode, SupplyCache>;
	/** Injectable clock (ms); tests of expiry replace it. */
	now: () => number;
	lastSupplyWarning: number;
}

type PricingThis = Service<PricingSettings> & PricingMethods & PricingLocal & DbThis;

function keyringOf(svc: PricingThis): QuoteKeyring {
	if (!svc.keyring) throw new ApiError("SERVICE_UNAVAILABLE", "Pricing is starting", { retryAfter: SERVICE_RETRY_AFTER_SECONDS });
	return svc.keyring;
}

/** The calling key's mode (`ctx.meta.mode`, set by the gateway and passed on by orders); test when absent. */
function modeOfMeta(meta: unknown): KeyMode {
	return (meta as { mode?: unknown } | null)?.mode === "live" ? "live" : "test";
}

function validation(details: ErrorDetail[]): ApiError {
	return new ApiError("VALIDATION_ERROR", details[0].message, { details });
}

const PricingService: ServiceSchema<PricingSettings, PricingMethods, PricingLocal & DbThis> = {
	name: "pricing",
	mixins: [DbMixin({ service: "pricing", migrations })],

	actions: {
		/** POST /ride/fare-estimate: one signed quote per service type (scooty first). */
		estimate: {
			access: "partner",
			params: estimateParams,
			async handler(this: PricingThis, ctx: Context<EstimateParams, PartnerCallMeta>): Promise<EstimateResult> {
				const partnerId = ctx.meta.partnerId!;
				const mode = modeOfMeta(ctx.meta);
				const { pickup, drop } = ctx.params;
				this.checkTrip(pickup, drop);
				const pickupAtSeconds = ctx.params.pickupAt === undefined ? undefined : this.pickupAtSeconds(ctx.params.pickupAt);
				const keyring = keyringOf(this);
				const types: readonly ServiceType[] = ctx.params.serviceType ? [ctx.params.serviceType] : SERVICE_TYPES;
				// A ride for later is priced without today's supply and demand (no surge, no ETA): they say nothing about then.
				const [routes, supply] = await Promise.all([
					Promise.all(types.map((t) => this.route(pickup, drop, t))),
					pickupAtSeconds === undefined ? this.supplyNear(ctx, pickup) : UNKNOWN_REPLY,
				]);
				// Whole seconds, rounded up (never shorter than the TTL): the token keeps seconds, so what the partner reads is exactly what is checked.
				const expiresAt = Math.ceil(this.now() / 1000) * 1000 + this.settings.quoteTtlSeconds * 1000;
				// Once per estimate, not per quote: toISOString showed in the profile.
				const expiresAtIso = new Date(expiresAt).toISOString();
				const quotes = types.map((serviceType, i): Quote => {
					const { distance, duration } = routes[i];
					const fare = this.fareOf(serviceType, routes[i], supply);
					return {
						quoteId: encodeQuote({ partnerId, mode, serviceType, pickup, drop, distance, duration, fare, expiresAt, pickupAtSeconds }, keyring),
						serviceType,
						totalAmount: toMajor(fare.total),
						currency: fare.currency,
						eta: supply[serviceType].eta,
						expiresAt: expiresAtIso,
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
			handler(this: PricingThis, ctx: Context<VerifyQuoteParams, PartnerCallMeta>): PricedTrip {
				const { quoteId, serviceType, pickup, drop, pickupAtSeconds } = ctx.params;
				const check = verifyQuote(
					quoteId,
					{ partnerId: ctx.meta.partnerId!, mode: modeOfMeta(ctx.meta), serviceType, pickup, drop, pickupAtSeconds },
					keyringOf(this),
					this.now(),
					this.settings.quoteMatchRadiusMetres,
				);
				if (!check.ok) {
					throw new ApiError(check.code, check.message, { details: [{ field: check.field ?? "quoteId", message: check.message }] });
				}
				const c = check.claims;
				// The ride's terms: the tariff in force at booking at the quote's surge (the quoted total still holds).
				const terms = fareTerms(this.settings.tariffs[c.serviceType], c.fare.surgeTenths);
				return { ...pricedTrip(c.serviceType, c.fare, c.distance, c.duration, quoteId), terms };
			},
		},

		/** create-order without a quoteId: the trip at the current price. Services only, never the gateway. */
		quote: {
			access: "internal",
			params: quoteParams,
			async handler(this: PricingThis, ctx: Context<QuoteParams>): Promise<PricedTrip> {
				const { serviceType, pickup, drop } = ctx.params;
				this.checkTrip(pickup, drop);
				const [route, supply] = await Promise.all([
					this.route(pickup, drop, serviceType),
					ctx.params.scheduled ? UNKNOWN_REPLY : this.supplyNear(ctx, pickup),
				]);
				const fare = this.fareOf(serviceType, route, supply);
				const terms = fareTerms(this.settings.tariffs[serviceType], fare.surgeTenths);
				return { ...pricedTrip(serviceType, fare, route.distance, route.duration), terms };
			},
		},

		/** Operators: the tariffs in force (major units). REPL: `call pricing.tariffs` */
		tariffs: {
			access: "internal",
			handler(this: PricingThis): TariffsReply {
				const tariffs = Object.fromEntries(SERVICE_TYPES.map((type) => [type, tariffView(this.settings.tariffs[type])])) as TariffsReply["tariffs"];
				return {
					tariffs,
					surgeMax: this.settings.surgeMaxTenths / 10,
					quoteTtlSeconds: this.settings.quoteTtlSeconds,
					maxTripKm: this.settings.maxTripMetres / 1000,
				};
			},
		},
	},

	methods: {
		/** A fare-estimate's pickupAt in whole Unix seconds, or the 400 of a time outside the booking window. */
		pickupAtSeconds(this: PricingThis, pickupAt: string): number {
			const check = checkPickupAt(pickupAt, this.now(), this.settings.schedule);
			if (!check.ok) throw new ApiError(check.code, check.message, { details: [{ field: "pickupAt", message: check.message }] });
			return check.pickupAtMs / 1000;
		},

		checkTrip(this: PricingThis, pickup: Point, drop: Point): void {
			const problems = straightLineProblems(pickup, drop, this.settings);
			if (problems.length > 0) throw validation(problems);
		},

		async route(this: PricingThis, pickup: Point, drop: Point, serviceType: ServiceType): Promise<RouteEstimate> {
			const route = await this.router.estimate(pickup, drop, serviceType);
			const problems = routedDistanceProblems(route.distance, this.settings);
			if (problems.length > 0) throw validation(problems);
			return route;
		},

		/** The tariff's fare for the route, surged by demand vs supply near the pickup. */
		fareOf(this: PricingThis, serviceType: ServiceType, route: RouteEstimate, supply: SupplyDemandReply): FarePaise {
			const s = supply[serviceType];
			return computeFare(this.settings.tariffs[serviceType], route.distance, route.duration, surgeTenths(s.demand, s.available, this.policy));
		},

		/**
		 * ETA and surge inputs from dispatch, cached briefly per ~100 m cell.
		 * Degrades to "unknown" (eta null, surge 1) when dispatch is absent,
		 * slow or failing: a quote without surge beats no quote.
		 */
		async supplyNear(this: PricingThis, ctx: Context, pickup: Point): Promise<SupplyDemandReply> {
			const now = Date.now();
			// The caller's key mode (create-order passes its meta on): that mode's drivers and demand only.
			const mode = modeOfMeta(ctx.meta);
			const cache = this.supplyCaches[mode];
			const cached = cache.get(pickup, now);
			if (cached) return cached;
			// No dispatch node at all: answer at once instead of waiting for a "not found".
			const endpoints = this.broker.registry.getActionEndpoints(SUPPLY_DEMAND_ACTION) as EndpointList | undefined;
			if (!endpoints?.hasAvailable()) return UNKNOWN_REPLY;
			let failed = false;
			const reply = await fetchSupplyDemand(
				() =>
					ctx.call<unknown, { point: Point; mode: KeyMode }>(
						SUPPLY_DEMAND_ACTION,
						{ point: { lat: pickup.lat, lng: pickup.lng }, mode },
						{ timeout: this.settings.supplyTimeoutMs },
					),
				this.settings.supplyTimeoutMs,
				(err) => {
					failed = true;
					// One warning a minute is enough to notice; one per request would flood the log.
					if (now - this.lastSupplyWarning > 60_000) {
						this.lastSupplyWarning = now;
						this.logger.warn(`dispatch.supplyDemand unavailable, quoting without ETA and surge: ${(err as Error)?.message ?? err}`);
					}
				},
			);
			if (!failed) cache.set(pickup, reply, now);
			return reply;
		},

		/** QUOTE_SIGNING_SECRET, else the one generated (once, by whichever instance came first) in pricing_secrets. */
		async loadSigningSecret(this: PricingThis): Promise<string> {
			if (this.settings.signingSecret) return this.settings.signingSecret;
			return this.repo.ensureSecret(SIGNING_SECRET_NAME, randomBytes(32).toString("base64url"));
		},
	},

	created(this: PricingThis) {
		useServiceSettings(this, readPricingSettings);
		this.policy = { maxTenths: this.settings.surgeMaxTenths, sensitivity: this.settings.surgeSensitivity };
		this.router = createRouteEstimator(this.settings);
		this.supplyCaches = { test: new SupplyCache(this.settings.supplyCacheMs), live: new SupplyCache(this.settings.supplyCacheMs) };
		this.now = () => Date.now();
		this.lastSupplyWarning = 0;
		this.keyring = undefined;
		// The DB mixin's `created` ran first and acquired the pool.
		this.repo = new PricingRepo(this.db);
	},

	async started(this: PricingThis) {
		// Runs after the DB mixin's `started`, so pricing_secrets exists.
		const secret = await this.loadSigningSecret();
		this.keyring = new QuoteKeyring(secret, this.settings.previousSigningSecrets);
		this.logger.info(`Quote signing key ${this.keyring.currentKid} (${this.settings.signingSecret ? "QUOTE_SIGNING_SECRET" : "pricing_secrets"})`);
	},
};

export default PricingService;
