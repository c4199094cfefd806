// oidc-provider 8 ships no type declarations; these cover the parts the dev
// issuer uses (dev-provider.ts), no more.
declare module "oidc-provider" {
  import type { IncomingMessage, ServerResponse } from "node:http";

  export interface Interaction {
    uid: string;
    prompt: { name: string; reasons: string[]; details: Record<string, unknown> };
    params: Record<string, unknown>;
    session?: { accountId?: string };
    grantId?: string;
  }

  export interface Grant {
    addOIDCScope(scope: string): void;
    addResourceScope(resource: string, scope: string): void;
    save(): Promise<string>;
  }

  export interface Client {
    clientId: string;
    clientName?: string;
    redirectUris: string[];
    grantTypeAllowed(type: string): boolean;
  }

  // The Koa context the helpers receive; only what the dev issuer reads.
  export interface KoaContext {
    oidc: { client?: Client };
  }

  export class OIDCProviderError extends Error {
    error: string;
    error_description?: string;
    constructor(status: number, message: string);
  }

  export const errors: {
    InvalidTarget: new (description?: string) => OIDCProviderError;
    InvalidClientMetadata: new (description?: string) => OIDCProviderError;
  };

  export default class Provider {
    constructor(issuer: string, configuration: Record<string, unknown>);
    readonly issuer: string;
    proxy: boolean;
    readonly app: { silent: boolean };
    readonly Grant: new (init: { accountId: string; clientId: string }) => Grant;
    readonly Client: { find(id: string): Promise<Client | undefined> };
    callback(): (req: IncomingMessage, res: ServerResponse) => void;
    interactionDetails(req: IncomingMessage, res: ServerResponse): Promise<Interaction>;
    interactionResult(
      req: IncomingMessage,
      res: ServerResponse,
      result: Record<string, unknown>,
      options?: { mergeWithLastSubmission?: boolean },
    ): Promise<string>;
    on(event: string, listener: (...args: unknown[]) => void): this;
  }
}
