/** Jest's globalTeardown: the server's autovacuum setting as global-setup.ts found it. */
export default async function globalTeardown(): Promise<void> {
	await (globalThis as { restoreAutovacuum?: () => Promise<void> }).restoreAutovacuum?.().catch(() => undefined);
}
