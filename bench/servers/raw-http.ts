/**
 * The raw node:http floor: answers every POST with the body in
 * BENCH_BODY_FILE (a real fare-estimate answer), after reading and parsing
 * the request JSON, as any JSON API must. Prints "listening <port>".
 */
import { createServer } from "node:http";
import { readFileSync } from "node:fs";

const body = readFileSync(process.env.BENCH_BODY_FILE!, "utf8");
const server = createServer((req, res) => {
	let raw = "";
	req.setEncoding("utf8");
	req.on("data", (c: string) => (raw += c));
	req.on("end", () => {
		try {
			JSON.parse(raw);
		} catch {
			res.writeHead(400).end();
			return;
		}
		res.writeHead(200, { "Content-Type": "application/json; charset=utf-8", "Content-Length": Buffer.byteLength(body) });
		res.end(body);
	});
});
server.listen(Number(process.env.PORT || 0), "127.0.0.1", () => {
	const addr = server.address();
	console.log(`listening ${typeof addr === "object" && addr ? addr.port : 0}`);
});
process.on("SIGTERM", () => server.close(() => process.exit(0)));
