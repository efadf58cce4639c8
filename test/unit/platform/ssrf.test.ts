import type { LookupAddress } from "node:dns";
import { assertWebhookUrlAllowed } from "../../../lib/webhook-url";
import { classifyAddress, guardedLookup, parseIpLiteral, resolveAllowed, isBlockedAddressError, type ResolveAll } from "../../../lib/ssrf";

const strict = { allowPrivate: false };
const dev = { allowPrivate: true };

/** A resolver with fixed answers, as an attacker's DNS would give them. */
function fakeDns(answers: Record<string, string[]>): ResolveAll {
	return async (hostname) => {
		const list = answers[hostname];
		if (!list) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: "ENOTFOUND" });
		return list.map((address): LookupAddress => ({ address, family: address.includes(":") ? 6 : 4 }));
	};
}

describe("address classification", () => {
	const refused = [
		["127.0.0.1", "loopback"],
		["127.255.255.254", "loopback"],
		["10.1.2.3", "private"],
		["172.16.0.1", "private"],
		["172.31.255.255", "private"],
		["192.168.1.1", "private"],
		["169.254.1.1", "link-local"],
		["169.254.169.254", "metadata (AWS/GCP/Azure)"],
		["100.64.0.1", "CGNAT"],
		["100.100.100.200", "metadata (Alibaba)"],
		["168.63.129.16", "metadata (Azure wireserver)"],
		["0.0.0.0", "unspecified"],
		["0.1.2.3", "this network"],
		["224.0.0.1", "multicast"],
		["239.255.255.250", "multicast"],
		["255.255.255.255", "broadcast"],
		["240.0.0.1", "reserved"],
		["192.0.2.1", "TEST-NET"],
		["198.18.0.1", "benchmarking"],
		["::1", "IPv6 loopback"],
		["::", "IPv6 unspecified"],
		["fe80::1", "IPv6 link-local"],
		["fc00::1", "IPv6 unique local"],
		["fd00:ec2::254", "AWS IPv6 metadata"],
		["ff02::1", "IPv6 multicast"],
		["::ffff:127.0.0.1", "IPv4-mapped loopback"],
		["::ffff:7f00:1", "IPv4-mapped loopback (hex)"],
		["::ffff:169.254.169.254", "IPv4-mapped metadata"],
		["::ffff:10.0.0.1", "IPv4-mapped private"],
		["::127.0.0.1", "IPv4-compatible loopback"],
		["64:ff9b::7f00:1", "NAT64 of loopback"],
		["2002:7f00:1::", "6to4 of loopback"],
		["2001:db8::1", "documentation"],
		["2001::1", "Teredo"],
		["100::1", "discard"],
	];
	it.each(refused)("refuses %s (%s)", (address) => {
		expect(classifyAddress(address, strict).allowed).toBe(false);
	});

	it.each([["93.184.216.34"], ["8.8.8.8"], ["1.1.1.1"], ["2606:4700:4700::1111"], ["::ffff:8.8.8.8"], ["64:ff9b::808:808"]])(
		"allows public %s",
		(address) => {
			expect(classifyAddress(address, strict).allowed).toBe(true);
		},
	);

	it("with private targets allowed (dev): loopback and private pass, metadata, multicast and unspecified never do", () => {
		for (const a of ["127.0.0.1", "10.0.0.1", "::1", "::ffff:127.0.0.1", "fd12::1"]) expect(classifyAddress(a, dev).allowed).toBe(true);
		for (const a of ["169.254.169.254", "fd00:ec2::254", "100.100.100.200", "224.0.0.1", "0.0.0.0", "::"])
			expect(classifyAddress(a, dev).allowed).toBe(false);
	});

	it("judges the SIIT form (::ffff:0:a.b.c.d, RFC 6145) by the IPv4 address it carries, and never throws", () => {
		for (const a of ["::ffff:0:7f00:1", "::ffff:0:a9fe:a9fe", "::ffff:0:a00:1"]) expect(classifyAddress(a, strict).allowed).toBe(false);
		expect(classifyAddress("::ffff:0:a9fe:a9fe", dev).allowed).toBe(false); // metadata, even in dev
		expect(classifyAddress("::ffff:0:808:808", strict).allowed).toBe(true);
	});

	it("answers a SIIT-form webhook URL with 400 INVALID_WEBHOOK_URL, not an internal error", async () => {
		await expect(assertWebhookUrlAllowed("http://[::ffff:0:7f00:1]/hooks", strict)).rejects.toMatchObject({ code: 400, type: "INVALID_WEBHOOK_URL" });
	});

	it("reads the legacy IPv4 forms inet_aton accepts", () => {
		for (const form of ["2130706433", "0177.0.0.1", "0x7f.1", "0x7f000001", "127.1", "017700000001", "0x7f.0.0.0x1"]) {
			expect(parseIpLiteral(form)?.toString()).toBe("127.0.0.1");
		}
		expect(parseIpLiteral("[::ffff:127.0.0.1]")?.toString()).toBe("::ffff:7f00:1");
		expect(parseIpLiteral("example.com")).toBeUndefined();
		expect(parseIpLiteral("1.2.3.4.5")).toBeUndefined();
	});
});

describe("create-order checkpoint: assertWebhookUrlAllowed", () => {
	const dns = fakeDns({
		"partner.example.com": ["93.184.216.34"],
		"evil.example.com": ["127.0.0.1"],
		"mixed.example.com": ["93.184.216.34", "10.0.0.5"],
		"v6evil.example.com": ["::ffff:169.254.169.254"],
		"meta.example.com": ["169.254.169.254"],
	});
	const policy = { ...strict, resolveAll: dns };

	const hostile = [
		"http://127.0.0.1/hook",
		"http://localhost:8080/hook",
		"http://LOCALHOST./hook",
		"http://app.localhost/hook",
		"http://printer.local/hook",
		"http://2130706433/hook",
		"http://0177.0.0.1/hook",
		"http://0x7f.1/hook",
		"http://127.1/hook",
		"http://0/hook",
		"http://[::1]/hook",
		"http://[::ffff:127.0.0.1]/hook",
		"http://[::ffff:a9fe:a9fe]/hook",
		"http://[fe80::1]/hook",
		"http://10.0.0.1/hook",
		"http://192.168.0.10/hook",
		"http://172.20.1.1/hook",
		"http://100.64.1.1/hook",
		"http://169.254.169.254/latest/meta-data/",
		"http://metadata.google.internal/computeMetadata/v1/",
		"http://224.0.0.1/hook",
		"http://evil.example.com/hook",
		"http://mixed.example.com/hook",
		"http://v6evil.example.com/hook",
		"https://meta.example.com/hook",
	];
	it.each(hostile.map((u) => [u]))("refuses %s with 400 INVALID_WEBHOOK_URL", async (url) => {
		await expect(assertWebhookUrlAllowed(url, policy)).rejects.toMatchObject({ code: 400, type: "INVALID_WEBHOOK_URL" });
	});

	it.each([
		["ftp://partner.example.com/x"],
		["/relative/hook"],
		["not a url"],
		["http://user:pw@partner.example.com/"],
		["javascript:alert(1)"],
		[""],
		["http://" + "a".repeat(2100) + ".com/"],
	])("refuses malformed %s", async (url) => {
		await expect(assertWebhookUrlAllowed(url, policy)).rejects.toMatchObject({ code: 400, type: "INVALID_WEBHOOK_URL" });
	});

	it("accepts public targets, and a name that does not resolve right now (connect time decides later)", async () => {
		await expect(assertWebhookUrlAllowed("https://partner.example.com/hooks/rides", policy)).resolves.toBeInstanceOf(URL);
		await expect(assertWebhookUrlAllowed("https://93.184.216.34:8443/h", policy)).resolves.toBeInstanceOf(URL);
		await expect(assertWebhookUrlAllowed("https://not-yet.example.com/h", policy)).resolves.toBeInstanceOf(URL);
	});

	it("allows loopback in dev/test mode, never metadata", async () => {
		await expect(assertWebhookUrlAllowed("http://127.0.0.1:9999/hook", dev)).resolves.toBeInstanceOf(URL);
		await expect(assertWebhookUrlAllowed("http://localhost:9999/hook", dev)).resolves.toBeInstanceOf(URL);
		await expect(assertWebhookUrlAllowed("http://169.254.169.254/", dev)).rejects.toMatchObject({ type: "INVALID_WEBHOOK_URL" });
		await expect(assertWebhookUrlAllowed("http://metadata.google.internal/", dev)).rejects.toMatchObject({ type: "INVALID_WEBHOOK_URL" });
	});

	it("does not say what a refused host resolved to", async () => {
		const err = await assertWebhookUrlAllowed("http://evil.example.com/", policy).catch((e: Error) => e);
		expect((err as Error).message).not.toContain("127.0.0.1");
	});

	it("bounds a slow resolver", async () => {
		const slow: ResolveAll = () => new Promise(() => undefined);
		await expect(assertWebhookUrlAllowed("https://slow.example.com/", { ...strict, resolveAll: slow, dnsTimeoutMs: 50 })).resolves.toBeInstanceOf(URL);
	});
});

describe("connect-time checkpoint: guarded lookup", () => {
	function lookupOnce(
		lookup: ReturnType<typeof guardedLookup>,
		host: string,
		all: boolean,
	): Promise<{ err: NodeJS.ErrnoException | null; address: unknown }> {
		return new Promise((resolve) => lookup(host, { all }, (err, address) => resolve({ err, address })));
	}

	it("refuses a name whose answer changed to a private address since create-order (DNS rebinding)", async () => {
		let calls = 0;
		const rebinding: ResolveAll = async () => (calls++ === 0 ? [{ address: "93.184.216.34", family: 4 }] : [{ address: "127.0.0.1", family: 4 }]);
		await expect(assertWebhookUrlAllowed("http://rebind.example.com/h", { ...strict, resolveAll: rebinding })).resolves.toBeInstanceOf(URL);
		const { err } = await lookupOnce(guardedLookup(strict, rebinding), "rebind.example.com", false);
		expect(isBlockedAddressError(err)).toBe(true);
	});

	it("answers in both callback shapes Node uses", async () => {
		const dns = fakeDns({ "ok.example.com": ["93.184.216.34", "2606:4700::1"] });
		const lookup = guardedLookup(strict, dns);
		expect((await lookupOnce(lookup, "ok.example.com", false)).address).toBe("93.184.216.34");
		expect((await lookupOnce(lookup, "ok.example.com", true)).address).toEqual([
			{ address: "93.184.216.34", family: 4 },
			{ address: "2606:4700::1", family: 6 },
		]);
	});

	it("refuses when any answer is private, and literal or metadata hosts without asking DNS", async () => {
		let asked = 0;
		const dns: ResolveAll = async (h) => {
			asked++;
			return fakeDns({ "mixed.example.com": ["93.184.216.34", "192.168.1.1"] })(h, 0);
		};
		await expect(resolveAllowed("mixed.example.com", strict, dns)).rejects.toMatchObject({ code: "EBLOCKEDADDRESS" });
		expect(asked).toBe(1);
		await expect(resolveAllowed("0x7f.1", strict, dns)).rejects.toMatchObject({ code: "EBLOCKEDADDRESS" });
		await expect(resolveAllowed("metadata.google.internal", dev, dns)).rejects.toMatchObject({ code: "EBLOCKEDADDRESS" });
		await expect(resolveAllowed("localhost", strict, dns)).rejects.toMatchObject({ code: "EBLOCKEDADDRESS" });
		expect(asked).toBe(1);
	});
});
