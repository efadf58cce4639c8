// ESLint: typescript-eslint's recommended rules on every TypeScript file;
// formatting is Prettier's (eslint-config-prettier turns off the rules it owns).
import js from "@eslint/js";
import prettier from "eslint-config-prettier";
import tseslint from "typescript-eslint";

export default tseslint.config(
	{ ignores: ["dist/", "packages/*/dist/", "packages/sdk/src/generated/", "data/", "node_modules/", "coverage/", "**/*.cjs", "**/*.mjs", "**/*.js"] },
	js.configs.recommended,
	...tseslint.configs.recommended,
	{
		rules: {
			// `_`-prefixed parameters and variables are deliberately unused (a callback's signature, a destructured rest).
			"@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_", varsIgnorePattern: "^_", caughtErrors: "none" }],
		},
	},
	{
		// Tests read untyped JSON answers and fake what they do not start; their assertions check the shapes.
		files: ["test/**/*.ts", "bench/**/*.ts"],
		rules: { "@typescript-eslint/no-explicit-any": "off" },
	},
	prettier,
);
