import { createHash } from "node:crypto";
import { bearingDegrees, destinationPoint, haversineMeters, interpolate } from "../../lib/geo";
import type { Point, ServiceType } from "../../contracts/common";
import type { DriverPosition, SandboxScenario, SimOffer, SimRide } from "../../contracts/dispatch";
import type { FleetSettings } from "./fleet.settings";

/**
 * The simulated fleet's pure rules: where seeded drivers stand, how long a
 * leg takes, and — from the ride's phase and when it began — where a driver
 * is now and what it does next. Everything is derived from dispatch's state
 * plus the clock, so a restarted simulator carries on where it stopped.
 */

/** A deterministic pseudo-random sequence in [0, 1) from a seed (mulberry32). */
export function seededRandom(seed: string): () => number {
	let a = createHash("sha256").update(seed).digest().readUInt32LE(0);
	return () => {
		a = (a + 0x6d2b79f5) >>> 0;
		let t = a;
		t = Math.imul(t ^ (t >>> 15), t | 1);
		t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
		return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
	};
}

/** A point uniformly spread over the disk of `radiusM` around `centre`, from `rand`. */
export function pointInDisk(centre: Point, radiusM: number, rand: () => number): Point {
	const distance = radiusM * Math.sqrt(rand());
	return destinationPoint(centre, rand() * 360, distance);
}

export interface SeedDriver {
	key: string;
	name: string;
	phone: string;
	vehicleNumber: string;
	serviceType: ServiceType;
	home: Point;
}

const pad = (n: number, width: number): string => String(n).padStart(width, "0");

/**
 * The `n`-th seeded driver of a type in a city. The same inputs always give
 * the same phone (the driver's identity), so seeding again registers nobody
 * twice.
 */
export function seedDriver(cityIndex: number, city: Point, serviceType: ServiceType, n: number, radiusM: number): SeedDriver {
	const key = `sim:${cityIndex}:${serviceType}:${n}`;
	const rand = seededRandom(key);
	const typeDigit = serviceType === "cab" ? 1 : 0;
	return {
		key,
		name: `Sim ${serviceType === "cab" ? "Cab" : "Scooty"} ${cityIndex + 1}-${n + 1}`,
		phone: `+9170${pad(cityIndex % 100, 2)}${typeDigit}${pad(n % 100_000, 5)}`,
		vehicleNumber: `SIM${pad(cityIndex % 100, 2)}${serviceType === "cab" ? "C" : "S"}${pad(n % 100_000, 5)}`,
		serviceType,
		home: pointInDisk(city, radiusM, rand),
	};
}

/**
 * The driver of spawn slot `slot`, placed near a pickup no seeded driver can
 * reach. The slot is the driver's identity (its phone), so however many
 * fleet instances spawn, at most one driver exists per slot: the number of
 * slots bounds the spawned drivers (`SIM_MAX_DRIVERS`). A slot already taken
 * answers its existing driver, which the fleet moves to the pickup when idle.
 */
export function spawnDriver(slot: number, pickup: Point, serviceType: ServiceType, rand: () => number = Math.random): SeedDriver {
	const digits = pad(slot % 100_000_000, 8);
	// 300–1200 m away: close enough to be offered the ride, far enough to drive to it.
	const home = destinationPoint(pickup, rand() * 360, 300 + rand() * 900);
	return {
		key: `spawn:${digits}`,
		name: `Sim ${serviceType === "cab" ? "Cab" : "Scooty"} S${slot + 1}`,
		phone: `+9181${digits}`,
		vehicleNumber: `SIMX${serviceType === "cab" ? "C" : "S"}${digits}`,
		serviceType,
		home,
	};
}

/** Up to `tries` distinct spawn slots to try, in random order (fewer when there are fewer slots). */
export function pickSlots(slots: number, tries: number, rand: () => number = Math.random): number[] {
	if (slots <= 0) return [];
	if (slots <= tries) {
		const all = Array.from({ length: slots }, (_, i) => i);
		for (let i = all.length - 1; i > 0; i--) {
			const j = Math.floor(rand() * (i + 1));
			[all[i], all[j]] = [all[j], all[i]];
		}
		return all;
	}
	const picked = new Set<number>();
	while (picked.size < tries) picked.add(Math.floor(rand() * slots));
	return [...picked];
}

/** Real milliseconds a simulated driver takes for a leg: road distance at the type's speed, compressed by SIM_SPEED. */
export function legDurationMs(
	from: Point,
	to: Point,
	serviceType: ServiceType,
	settings: Pick<FleetSettings, "roadFactor" | "speedsKmh" | "simSpeed" | "fastLegMs">,
	sandbox: SandboxScenario | null,
): number {
	if (sandbox === "fast") return settings.fastLegMs;
	const metres = haversineMeters(from, to) * settings.roadFactor;
	const worldMs = (metres / ((settings.speedsKmh[serviceType] * 1000) / 3600)) * 1000;
	return worldMs / settings.simSpeed;
}

/** Real milliseconds of a simulated-world delay. */
export function compressed(worldMs: number, simSpeed: number, sandbox: SandboxScenario | null): number {
	return sandbox === "fast" ? 0 : worldMs / simSpeed;
}

/** Real milliseconds between two position reports of a moving simulated driver. */
export function reportIntervalMs(settings: Pick<FleetSettings, "reportIntervalMs" | "minReportIntervalMs" | "simSpeed">): number {
	return Math.max(settings.minReportIntervalMs, settings.reportIntervalMs / settings.simSpeed);
}

/** Where a driver is on a leg after `fraction` of it, facing the way it drives. */
export function positionOnLeg(from: Point, to: Point, fraction: number): DriverPosition {
	const at = interpolate(from, to, fraction);
	const heading = Math.round(bearingDegrees(from, to));
	return { lat: at.lat, lng: at.lng, heading: heading === 360 ? 0 : heading };
}

export type SimStep =
	| { kind: "wait" }
	| { kind: "accept" }
	| { kind: "report"; location: DriverPosition }
	| { kind: "arrive"; location: DriverPosition }
	| { kind: "dropOut"; location: DriverPosition }
	| { kind: "start" }
	| { kind: "drop"; location: DriverPosition };

type StepSettings = Pick<FleetSettings, "roadFactor" | "speedsKmh" | "simSpeed" | "fastLegMs" | "acceptDelayMs" | "boardingDelayMs">;

/** What a simulated driver does about an offer at `nowMs`. */
export function offerStep(offer: SimOffer, nowMs: number, settings: StepSettings): SimStep {
	const due = Date.parse(offer.offeredAt) + compressed(settings.acceptDelayMs, settings.simSpeed, offer.sandbox);
	return nowMs >= due ? { kind: "accept" } : { kind: "wait" };
}

/**
 * What a simulated driver on a ride does at `nowMs`: report its position on
 * the current leg, arrive at the end of the leg to the pickup, start after
 * boarding, drop at the end of the trip. In the `driver_drop_out` sandbox
 * scenario the first driver gives up halfway to the pickup.
 */
export function rideStep(ride: SimRide, nowMs: number, settings: StepSettings): SimStep {
	const elapsed = nowMs - Date.parse(ride.phaseSince);
	switch (ride.status) {
		case "accepted": {
			const origin = ride.origin ?? ride.pickup;
			const duration = legDurationMs(origin, ride.pickup, ride.serviceType, settings, ride.sandbox);
			const fraction = duration > 0 ? elapsed / duration : 1;
			if (ride.sandbox === "driver_drop_out" && ride.dropOuts === 0 && fraction >= 0.5) {
				return { kind: "dropOut", location: positionOnLeg(origin, ride.pickup, 0.5) };
			}
			if (fraction >= 1) return { kind: "arrive", location: positionOnLeg(origin, ride.pickup, 1) };
			return { kind: "report", location: positionOnLeg(origin, ride.pickup, fraction) };
		}
		case "arrived":
			return elapsed >= compressed(settings.boardingDelayMs, settings.simSpeed, ride.sandbox) ? { kind: "start" } : { kind: "wait" };
		case "started": {
			const duration = legDurationMs(ride.pickup, ride.drop, ride.serviceType, settings, ride.sandbox);
			const fraction = duration > 0 ? elapsed / duration : 1;
			if (fraction >= 1) return { kind: "drop", location: positionOnLeg(ride.pickup, ride.drop, 1) };
			return { kind: "report", location: positionOnLeg(ride.pickup, ride.drop, fraction) };
		}
		default:
			return { kind: "wait" };
	}
}
