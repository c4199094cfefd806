// In the order an unpinned skill prefers them: what nearly every server
// takes first (RFC 6749 §2.3.1 requires Basic of servers that issue secrets).
// Its own module, so that the CLI's help names them without loading the
// OAuth client.
export const TOKEN_ENDPOINT_AUTH_METHODS = ["client_secret_basic", "client_secret_post", "private_key_jwt"] as const;

export type TokenEndpointAuthMethod = (typeof TOKEN_ENDPOINT_AUTH_METHODS)[number];
