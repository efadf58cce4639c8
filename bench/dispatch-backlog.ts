/**
 * Background database work with rides waiting (issue 9): services in one
 * process, FLEET_MODE=live, on a throw-away database on the server
 * PostgreSQL; N live rides searching with no driver anywhere near; samples
 * pg_stat_database (xact_commit + xact_rollback) of that database every
 * second. Prints tx/s with 0 waiting rides (the floor) and with N, and the
 * extra tx/s per 100 waiting rides. Prints figures, asserts nothing.
 *
 *   npx tsx bench/dispatch-backlog.ts [N=400] [seconds=20]
 */
import { randomInt } from "node:crypto";
import { startTestbed } from "../test/helpers/testbed";
import { connect, SERVER_DATABASE_URL } from "../test/helpers/db";

const N = Number(process.argv[2] ?? 400);
const SECONDS = Number(process.argv[3] ?? 20);

async function main(): Promise<void> {
	const bed = await startTestbed("bench-backlog", {
		services: ["partners", "riders", "pricing", "orders", "dispatch", "notifications"],
		env: { FLEET_MODE: "live", METRICS_PORT: "0", DISPATCH_TIMEOUT_MS: "3600000", LOGLEVEL: "error" },
	});
	const admin = await connect(SERVER_DATABASE_URL);
	const txCount = async (): Promise<number> => {
		const r = await admin.query("SELECT xact_commit + xact_rollback AS n FROM pg_stat_database WHERE datname = $1", [bed.db.name]);
		return Number(r.rows[0].n);
	};
	const sample = async (label: string): Promise<number> => {
		// pg_stat_database is flushed at most every ~1 s: settle, then measure over SECONDS.
		await new Promise((r) => setTimeout(r, 2000));
		const a = await txCount();
		const t0 = Date.now();
		await new Promise((r) => setTimeout(r, SECONDS * 1000));
		const b = await txCount();
		const rate = (b - a) / ((Date.now() - t0) / 1000);
		console.log(`${label}: ${rate.toFixed(1)} tx/s`);
		return rate;
	};
	try {
		const broker = bed.node.broker;
		const partner = await broker.call<{ partnerId: string }, unknown>("partners.create", { name: "Backlog bench", mode: "live" });
		const floor = await sample("0 rides waiting");
		for (let i = 0; i < N; i += 20) {
			await Promise.all(
				Array.from({ length: Math.min(20, N - i) }, (_, k) =>
					broker.call(
						"orders.create",
						{
							user: { name: "Bench Rider", phone: `+9197${String(randomInt(0, 1e8)).padStart(8, "0")}` },
							serviceType: (i + k) % 2 ? "cab" : "scooty",
							pickup: { lat: 12.9716 + (randomInt(0, 2000) - 1000) / 1e5, lng: 77.5946 + (randomInt(0, 2000) - 1000) / 1e5 },
							drop: { lat: 12.9352, lng: 77.6245 },
							webhookURL: "https://partner.example.com/hooks",
						},
						{ meta: { partnerId: partner.partnerId, mode: "live" } },
					),
				),
			);
		}
		// Let the creation burst pass and the backoff reach its steady state (DISPATCH_RETRY_MAX_MS, 30 s).
		await new Promise((r) => setTimeout(r, Number(process.env.BENCH_SETTLE_MS ?? 35_000)));
		const loaded = await sample(`${N} rides waiting`);
		console.log(`extra: ${(((loaded - floor) * 100) / N).toFixed(1)} tx/s per 100 waiting rides (goal <= 5)`);
	} finally {
		await admin.end();
		await bed.stop();
	}
}

main().then(
	() => process.exit(0),
	(err) => {
		console.error(err);
		process.exit(1);
	},
);
