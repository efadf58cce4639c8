/** The little of autocannon's programmatic API the bench uses (the package ships no types). */
declare module "autocannon" {
	interface Histogram {
		average: number;
		p50: number;
		p99: number;
		max: number;
		total: number;
	}
	interface Result {
		duration: number;
		requests: Histogram;
		latency: Histogram;
		non2xx: number;
		errors: number;
		timeouts: number;
	}
	function autocannon(opts: Record<string, unknown>): Promise<Result>;
	export default autocannon;
}
