/** The version segment every API path starts with (the spec's `{base_url}` ends in it). */
export const apiPrefix = "/api/v1"
