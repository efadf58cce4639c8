import type { Context, Service, ServiceSchema, ServiceSettingSchema } from "moleculer";
import { DISPATCH_EVENTS, type DriverJob, type DriverView, type DriverWaitStartedEvent, type OfferCreatedEvent } from "../../contracts/dispatch";
import * as driverApi from "../../contracts/driver";
import { ApiError } from "../../lib/errors";
import type { DriverApi } from "./driver-api";
import type { DriverTokens } from "./driver-tokens";
import type { KnownCredentials } from "../../lib/known-credentials";
import type { OfferWaits } from "./offer-waits";
import { actorOf, type AuditLog } from "../../lib/audit";
import type { AuditPage } from "../../contracts/audit";

/**
 * The driver API as a Moleculer mixin of dispatch: the driver-facing actions
 * (`access: "driver"`, reached only through the gateway's `/driver/*` routes
 * with a driver token) and the token actions for operators and the gateway.
 * Its parts are built by dispatch's `created()` and live on the service.
 */

/** What the mixin needs on the service. */
export interface DriverApiHost {
	driverApi: DriverApi;
	driverTokens: DriverTokens;
	/** Digest prefixes of every live driver token (lib/known-credentials.ts). */
	knownTokens: KnownCredentials;
	offerWaits: OfferWaits;
	/** The operator audit trail (`dispatch_audit`). */
	auditLog: AuditLog;
}

type This = Service & DriverApiHost;

/** The driver the gateway resolved from the token (the access middleware already refused a call without it). */
function driverIdOf(ctx: Context): string {
	const id = (ctx.meta as { driverId?: unknown }).driverId;
	if (typeof id !== "string" || id.length === 0) throw new ApiError("UNAUTHORIZED", "Missing or invalid driver token");
	return id;
}

const driverApiSchema: Partial<ServiceSchema<ServiceSettingSchema, Record<string, never>, DriverApiHost>> = {
	actions: {
		// ---- driver-facing (the gateway's /driver/* routes) ----

		/** POST /driver/online */
		driverGoOnline: {
			access: "driver",
			params: driverApi.driverOnlineParams,
			handler(this: This, ctx: Context<driverApi.DriverOnlineParams>): Promise<DriverView> {
				return this.driverApi.online(driverIdOf(ctx), ctx.params.location);
			},
		},
		/** POST /driver/offline */
		driverGoOffline: {
			access: "driver",
			params: driverApi.driverOfflineParams,
			handler(this: This, ctx: Context): Promise<DriverView> {
				return this.driverApi.offline(driverIdOf(ctx));
			},
		},
		/** POST /driver/location: a batch, the newest fix wins. */
		driverReportLocations: {
			access: "driver",
			params: driverApi.driverLocationsParams,
			handler(this: This, ctx: Context<driverApi.DriverLocationsParams>): Promise<DriverView> {
				return this.driverApi.locations(driverIdOf(ctx), ctx.params.locations);
			},
		},
		/** GET or POST /driver/offers: the current offer or ride at once, else waits up to `waitSeconds` for an offer. */
		driverOffers: {
			access: "driver",
			params: driverApi.driverOffersParams,
			handler(this: This, ctx: Context<driverApi.DriverOffersParams>): Promise<DriverJob> {
				return this.driverApi.offers(driverIdOf(ctx), ctx.params.waitSeconds);
			},
		},
		/** POST /driver/accept */
		driverAccept: {
			access: "driver",
			params: driverApi.driverOrderParams,
			handler(this: This, ctx: Context<driverApi.DriverOrderParams>): Promise<DriverJob> {
				return this.driverApi.accept(driverIdOf(ctx), ctx.params, ctx);
			},
		},
		/** POST /driver/decline */
		driverDecline: {
			access: "driver",
			params: driverApi.driverOrderParams,
			handler(this: This, ctx: Context<driverApi.DriverOrderParams>): Promise<DriverView> {
				return this.driverApi.decline(driverIdOf(ctx), ctx.params);
			},
		},
		/** POST /driver/arrived */
		driverArrived: {
			access: "driver",
			params: driverApi.driverArrivedParams,
			handler(this: This, ctx: Context<driverApi.DriverArrivedParams>): Promise<DriverJob> {
				return this.driverApi.arrived(driverIdOf(ctx), ctx.params, ctx);
			},
		},
		/** POST /driver/start: with the rider's OTP (422 INVALID_OTP, 409 OTP_LOCKED after too many tries). */
		driverStart: {
			access: "driver",
			params: driverApi.driverStartParams,
			handler(this: This, ctx: Context<driverApi.DriverStartParams>): Promise<DriverJob> {
				return this.driverApi.start(driverIdOf(ctx), ctx.params, ctx);
			},
		},
		/** POST /driver/drop */
		driverDrop: {
			access: "driver",
			params: driverApi.driverOrderParams,
			handler(this: This, ctx: Context<driverApi.DriverOrderParams>): Promise<DriverJob> {
				return this.driverApi.drop(driverIdOf(ctx), ctx.params, ctx);
			},
		},
		/** POST /driver/cancel: the driver drops out before the ride started; the ride goes back to searching. */
		driverCancel: {
			access: "driver",
			params: driverApi.driverCancelParams,
			handler(this: This, ctx: Context<driverApi.DriverCancelParams>): Promise<DriverView> {
				return this.driverApi.cancel(driverIdOf(ctx), ctx.params, ctx);
			},
		},

		// ---- tokens (operators, the gateway) ----

		/**
		 * Registers the driver (idempotent by phone) and issues a token, shown once; `expiresIn` (`30d`) gives it a lifetime.
		 * REPL: `call dispatch.createDriverToken --name "Ravi K" --phone +919800000001 --vehicleNumber KA01AB1234 --serviceType cab --expiresIn 30d`
		 */
		createDriverToken: {
			access: "internal",
			params: driverApi.createDriverTokenParams,
			handler(this: This, ctx: Context<driverApi.CreateDriverTokenParams>): Promise<driverApi.DriverTokenCreated> {
				const actor = actorOf(ctx);
				return this.driverTokens.create(
					ctx.params,
					(driverId) => (t, tokenId) =>
						this.auditLog.record(
							{ actor, action: "dispatch.createDriverToken", subject: driverId, target: tokenId, detail: { mode: ctx.params.mode ?? "live" } },
							t,
						),
				);
			},
		},
		/** Revokes every token of a driver, on every instance at once. REPL: `call dispatch.revokeDriverTokens --driverId drv_…` */
		revokeDriverTokens: {
			access: "internal",
			params: driverApi.revokeDriverTokensParams,
			handler(this: This, ctx: Context<driverApi.RevokeDriverTokensParams>): Promise<{ driverId: string; revoked: number }> {
				const actor = actorOf(ctx);
				return this.driverTokens.revokeAll(ctx.params.driverId, (t, revoked) =>
					this.auditLog.record({ actor, action: "dispatch.revokeDriverTokens", subject: ctx.params.driverId, detail: { revoked } }, t),
				);
			},
		},
		/**
		 * Revokes one token, on every instance at once; the driver's other tokens keep working (with none left it goes offline).
		 * REPL: `call dispatch.revokeDriverToken --tokenId dtk_…` or `--prefix rdt_…` (the `tokenPrefix` lists show)
		 */
		revokeDriverToken: {
			access: "internal",
			params: driverApi.revokeDriverTokenParams,
			handler(this: This, ctx: Context<driverApi.RevokeDriverTokenParams>): Promise<driverApi.RevokedDriverToken> {
				const actor = actorOf(ctx);
				return this.driverTokens.revokeOne(ctx.params, (t, r) =>
					this.auditLog.record(
						{ actor, action: "dispatch.revokeDriverToken", subject: r.driver_id, target: r.id, detail: { revoked: r.revoked } },
						t,
					),
				);
			},
		},
		/** The CLI revoked tokens of a driver in its own process: every instance forgets them; the driver goes offline unless a token of it still works. */
		announceDriverTokens: {
			access: "internal",
			params: driverApi.revokeDriverTokensParams,
			async handler(this: This, ctx: Context<driverApi.RevokeDriverTokensParams>): Promise<{ ok: true }> {
				await this.driverTokens.announceRevoked(ctx.params.driverId);
				return { ok: true };
			},
		},
		/** The CLI created a token in its own process: this instance knows it before it answers, then every other instance reads it too. */
		announceDriverTokenCreated: {
			access: "internal",
			params: driverApi.revokeDriverTokensParams,
			async handler(this: This, ctx: Context<driverApi.RevokeDriverTokensParams>): Promise<{ ok: true }> {
				await this.knownTokens.refresh();
				await this.broker.broadcast(driverApi.DRIVER_TOKEN_EVENTS.created, { driverId: ctx.params.driverId });
				return { ok: true };
			},
		},
		/** Operators: the audit trail of drivers registered and tokens created or revoked, newest first. `npm run driver -- audit`; REPL: `call dispatch.audit` */
		audit: {
			access: "internal",
			params: driverApi.driverAuditParams,
			handler(this: This, ctx: Context<driverApi.DriverAuditParams>): Promise<AuditPage> {
				return this.auditLog.page(ctx.params.driverId, ctx.params.limit, ctx.params.before);
			},
		},
		/** Tokens, newest first (never the token itself). REPL: `call dispatch.listDriverTokens` */
		listDriverTokens: {
			access: "internal",
			handler(this: This): Promise<driverApi.DriverTokenView[]> {
				return this.driverTokens.list();
			},
		},
		/** The gateway: a driver token's SHA-256 → `{ driverId }`, or null (unknown, revoked or expired); the token itself never crosses the bus. */
		authenticateDriver: {
			access: "internal",
			params: driverApi.authenticateDriverParams,
			handler(this: This, ctx: Context<driverApi.AuthenticateDriverParams>): Promise<driverApi.AuthenticatedDriver | null> {
				return this.driverTokens.authenticate(ctx.params.tokenHash, ctx.params.onlyKnown === true);
			},
		},
	},

	events: {
		/** Some driver's tokens were revoked (on any instance): drop what this one resolved. */
		[driverApi.DRIVER_TOKEN_EVENTS.changed]: {
			handler(this: This, ctx: Context<driverApi.DriverTokensChangedEvent>) {
				this.driverTokens.changed();
				void this.knownTokens.reload();
				// A revoked driver's wait here ends now instead of at its deadline.
				this.offerWaits.supersede(ctx.params.driverId);
			},
		},
		/** A token was created (on any instance, or by `npm run driver`): read the new ones into the known set. */
		[driverApi.DRIVER_TOKEN_EVENTS.created]: {
			handler(this: This) {
				void this.knownTokens.refresh();
			},
		},
		/** Connected or reconnected to the bus: a revocation or creation may have been broadcast meanwhile. */
		"$transporter.connected": {
			handler(this: This) {
				this.driverTokens.changed();
				void this.knownTokens.refresh();
			},
		},
		/** An offer for a driver, made by any instance: its wait here (if any) answers with it. */
		[DISPATCH_EVENTS.offerCreated]: {
			handler(this: This, ctx: Context<OfferCreatedEvent>) {
				if (!ctx.params.simulated) this.offerWaits.offer(ctx.params);
			},
		},
		/** The driver opened a wait somewhere: any other wait of it here ends (one wait per driver). */
		[DISPATCH_EVENTS.driverWaitStarted]: {
			handler(this: This, ctx: Context<DriverWaitStartedEvent>) {
				this.offerWaits.supersede(ctx.params.driverId, ctx.params.waitId);
			},
		},
	},
};

/** Typed against its host above; mixed in as any mixin is. */
export const DriverApiMixin = driverApiSchema as Partial<ServiceSchema>;
