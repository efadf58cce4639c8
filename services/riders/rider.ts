/**
 * Rider field rules. Phones are E.164 (contracts/riders.ts), the key that
 * identifies a rider within a partner, so they are stored exactly as given.
 */

/**
 * Email domains are case-insensitive, local parts formally are not: lower-case
 * only the domain so "Asha@Example.COM" and "Asha@example.com" are stored alike.
 */
export function normaliseEmail(email: string | undefined | null): string | null {
	if (email === undefined || email === null) return null;
	const trimmed = email.trim();
	if (trimmed === "") return null;
	const at = trimmed.lastIndexOf("@");
	if (at < 0) return trimmed;
	return trimmed.slice(0, at) + "@" + trimmed.slice(at + 1).toLowerCase();
}
