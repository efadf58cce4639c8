/**
 * Input that PostgreSQL cannot store, or that costs us a crash to handle,
 * found before any service touches it: U+0000 (refused by `text` and `jsonb`),
 * unpaired UTF-16 surrogates (refused by `jsonb`, silently turned into U+FFFD
 * in `text`), and objects/arrays nested deeper than the JSON serialiser and
 * the validator walk safely. Checked in string values and in object keys.
 * Pure and iterative (a 60,000-level array cannot overflow the stack here).
 */
import { PARAMS_MAX_DEPTH } from "../contracts/common";

export type UnsafeKind = "stringUnsafe" | "objectDepth";

export interface UnsafeInput {
	kind: UnsafeKind;
	/** The field as fastest-validator names it: `user.name`, `tags[2]`, `metadata.note`; "" for the root. */
	field: string;
}

/** U+0000, a high surrogate not followed by a low one, or a low surrogate not preceded by a high one. */
// eslint-disable-next-line no-control-regex -- U+0000 is what it looks for
const UNSAFE_CHAR = /\u0000|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

/** Any U+0000 or surrogate at all: the cheap test that lets almost every string skip UNSAFE_CHAR's lookarounds. */
// eslint-disable-next-line no-control-regex -- U+0000 is what it looks for
const MAYBE_UNSAFE_CHAR = /[\u0000\ud800-\udfff]/;

export function isUnsafeString(s: string): boolean {
	return MAYBE_UNSAFE_CHAR.test(s) && UNSAFE_CHAR.test(s);
}

/**
 * Whether `value` holds anything findUnsafeInput would report: the walk
 * without allocations that every clean request takes. Recursion is bounded
 * by `maxDepth`.
 */
function hasUnsafeInput(value: unknown, depth: number, maxDepth: number): boolean {
	if (typeof value === "string") return isUnsafeString(value);
	if (!isWalkable(value)) return false;
	if (depth >= maxDepth) return true;
	if (Array.isArray(value)) {
		for (let i = 0; i < value.length; i++) if (hasUnsafeInput(value[i], depth + 1, maxDepth)) return true;
		return false;
	}
	for (const k in value) {
		if (!Object.prototype.hasOwnProperty.call(value, k)) continue;
		if (isUnsafeString(k) || hasUnsafeInput(value[k], depth + 1, maxDepth)) return true;
	}
	return false;
}

export function childField(parent: string, key: string): string {
	return parent === "" ? key : `${parent}.${key}`;
}

export function itemField(parent: string, index: number): string {
	return `${parent}[${index}]`;
}

function isWalkable(value: unknown): value is Record<string, unknown> | unknown[] {
	if (typeof value !== "object" || value === null) return false;
	if (Array.isArray(value)) return true;
	const proto = Object.getPrototypeOf(value) as unknown;
	return proto === Object.prototype || proto === null;
}

/**
 * Every unsafe string, key and too-deep container in `value`, in document
 * order, at most `limit` of them. Only plain objects and arrays are walked
 * (params that crossed NATS are JSON; local callers may pass Dates or Buffers).
 */
export function findUnsafeInput(value: unknown, opts: { maxDepth?: number; limit?: number } = {}): UnsafeInput[] {
	const maxDepth = opts.maxDepth ?? PARAMS_MAX_DEPTH;
	const limit = opts.limit ?? 50;
	if (!hasUnsafeInput(value, 0, maxDepth)) return [];
	const found: UnsafeInput[] = [];
	type Item = { value: unknown; field: string; depth: number; badKey?: true };
	const stack: Item[] = [{ value, field: "", depth: 0 }];
	while (stack.length > 0 && found.length < limit) {
		const item = stack.pop()!;
		if (item.badKey) {
			found.push({ kind: "stringUnsafe", field: item.field });
			continue;
		}
		if (typeof item.value === "string") {
			if (isUnsafeString(item.value)) found.push({ kind: "stringUnsafe", field: item.field });
			continue;
		}
		if (!isWalkable(item.value)) continue;
		if (item.depth >= maxDepth) {
			found.push({ kind: "objectDepth", field: item.field });
			continue;
		}
		const children: Item[] = [];
		if (Array.isArray(item.value)) {
			item.value.forEach((v, i) => children.push({ value: v, field: itemField(item.field, i), depth: item.depth + 1 }));
		} else {
			for (const [k, v] of Object.entries(item.value)) {
				const field = childField(item.field, k);
				children.push(
					isUnsafeString(k) ? { value: undefined, field, depth: item.depth + 1, badKey: true } : { value: v, field, depth: item.depth + 1 },
				);
			}
		}
		// Reversed onto the stack so they come off in document order.
		for (let i = children.length - 1; i >= 0; i--) stack.push(children[i]);
	}
	return found.slice(0, limit);
}

/** The object at a fastest-validator path (`a.b[2].c`; "" is the root), found by walking `value`; undefined when none. */
export function objectAtField(value: unknown, field: string, maxDepth = PARAMS_MAX_DEPTH): Record<string, unknown> | undefined {
	const stack: Array<{ value: unknown; field: string; depth: number }> = [{ value, field: "", depth: 0 }];
	while (stack.length > 0) {
		const item = stack.pop()!;
		if (!isWalkable(item.value)) continue;
		if (item.field === field && !Array.isArray(item.value)) return item.value;
		// Only descend along prefixes of the wanted path.
		if (item.field !== "" && !field.startsWith(item.field)) continue;
		if (item.depth >= maxDepth) continue;
		if (Array.isArray(item.value)) item.value.forEach((v, i) => stack.push({ value: v, field: itemField(item.field, i), depth: item.depth + 1 }));
		else for (const [k, v] of Object.entries(item.value)) stack.push({ value: v, field: childField(item.field, k), depth: item.depth + 1 });
	}
	return undefined;
}
