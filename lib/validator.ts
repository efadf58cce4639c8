import { Validators } from "moleculer";
import { VALIDATION_MESSAGES } from "../contracts/errors";
import { findUnsafeInput, objectAtField, type UnsafeInput } from "./input-safety";

/**
 * The broker validator every node uses (moleculer.config.ts): fastest-validator
 * with the contract's messages, plus two rules for every action and event
 * that declares params, partner or internal, local or called over NATS:
 *
 * - no U+0000, no unpaired surrogate in any string or key, and no nesting
 *   deeper than PARAMS_MAX_DEPTH, anywhere in the params (free-form
 *   `metadata` included): `stringUnsafe` / `objectDepth` errors naming the
 *   field. PostgreSQL cannot store such strings; they never reach it.
 * - a strict object's unknown keys are listed one by one, each with its own
 *   path as the field (`objectStrict`, "quoteID is not a known field (did you
 *   mean quoteId?)"), instead of fastest-validator's one error per object.
 *
 * A failure is moleculer's ValidationError, as for any other rule, so the
 * gateway answers 400 VALIDATION_ERROR with these details.
 */

export interface ValidationIssue {
	type: string;
	field?: string;
	message?: string;
	expected?: unknown;
	actual?: unknown;
	[key: string]: unknown;
}

type Checker = ((value: unknown, opts?: unknown) => true | ValidationIssue[] | Promise<true | ValidationIssue[]>) & { async?: boolean };

function format(template: string, field: string, expected?: string): string {
	return template.replace(/\{field\}/g, field).replace(/\{expected\}/g, expected ?? "");
}

export function unsafeIssue(u: UnsafeInput): ValidationIssue {
	const field = u.field === "" ? "body" : u.field;
	return { type: u.kind, field, message: format(VALIDATION_MESSAGES[u.kind], field) };
}

/** One `objectStrict` issue per unknown key of the object fastest-validator complained about. */
export function expandStrictIssue(issue: ValidationIssue, params: unknown): ValidationIssue[] {
	const parent = typeof issue.field === "string" ? issue.field : "";
	const allowed = typeof issue.expected === "string" ? issue.expected.split(", ") : [];
	const obj = objectAtField(params, parent);
	const unknown = obj ? Object.keys(obj).filter((k) => !allowed.includes(k)) : String(issue.actual ?? "").split(", ");
	return unknown.map((key) => {
		const field = parent === "" ? key : `${parent}.${key}`;
		const twin = allowed.find((a) => a !== "" && a.toLowerCase() === key.toLowerCase());
		const hint = twin ? ` (did you mean ${twin}?)` : "";
		return { type: "objectStrict", field, actual: key, message: format(VALIDATION_MESSAGES.objectStrict, field) + hint };
	});
}

/** The unsafe-input issues first, then the schema's (without repeating a field already named). */
export function mergeIssues(params: unknown, schemaResult: true | ValidationIssue[]): true | ValidationIssue[] {
	const unsafe = findUnsafeInput(params).map(unsafeIssue);
	const fromSchema = schemaResult === true ? [] : schemaResult.flatMap((i) => (i.type === "objectStrict" ? expandStrictIssue(i, params) : [i]));
	if (unsafe.length === 0) return fromSchema.length === 0 ? true : fromSchema;
	const named = new Set(unsafe.map((u) => u.field));
	return [...unsafe, ...fromSchema.filter((i) => !named.has(i.field ?? ""))];
}

export class SafeFastestValidator extends Validators.Fastest {
	constructor(opts: ConstructorParameters<typeof Validators.Fastest>[0] = {}) {
		super({ ...opts, messages: { ...VALIDATION_MESSAGES, ...(opts as { messages?: Record<string, string> }).messages } });
	}

	// Moleculer's types say a checker returns a boolean; at run time it is `true` or the list of issues.
	compile(schema: Record<string, unknown>): ReturnType<Validators.Fastest["compile"]> {
		const check = super.compile(schema) as unknown as Checker;
		const safe: Checker = (params, opts) => {
			const res = check(params, opts);
			if (res instanceof Promise) return res.then((r) => mergeIssues(params, r));
			return mergeIssues(params, res);
		};
		safe.async = check.async;
		return safe as unknown as ReturnType<Validators.Fastest["compile"]>;
	}
}

/** The validator for BrokerOptions.validator. */
export function createValidator(): SafeFastestValidator {
	return new SafeFastestValidator();
}
