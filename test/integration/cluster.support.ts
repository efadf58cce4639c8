// Moved to test/helpers/http.ts; this re-export stays until dispatch-metrics.test.ts imports it from there.
export { freePort } from "../helpers/http";
