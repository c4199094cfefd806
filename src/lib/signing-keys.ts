import { createPrivateKey, createPublicKey, generateKeyPair, type KeyObject } from "node:crypto";
import { promisify } from "node:util";
import { calculateJwkThumbprint, exportJWK } from "jose";

const generate = promisify(generateKeyPair);

export type SigningAlg = "RS256" | "ES256";
export const SIGNING_ALGS: readonly SigningAlg[] = ["RS256", "ES256"];

export interface SigningKeyPair {
  // PKCS#8 PEM; sealed before it is stored.
  privateKeyPem: string;
  // With `kid` (RFC 7638 thumbprint), `alg` and `use: sig`, ready to register.
  publicJwk: Record<string, unknown>;
}

async function publicJwkOf(key: KeyObject, alg: SigningAlg): Promise<Record<string, unknown>> {
  const jwk = await exportJWK(key);
  return { ...jwk, kid: await calculateJwkThumbprint(jwk), alg, use: "sig" };
}

export async function generateSigningKeyPair(alg: SigningAlg): Promise<SigningKeyPair> {
  const { privateKey, publicKey } =
    alg === "RS256" ? await generate("rsa", { modulusLength: 2048 }) : await generate("ec", { namedCurve: "P-256" });
  return { privateKeyPem: privateKey.export({ format: "pem", type: "pkcs8" }) as string, publicJwk: await publicJwkOf(publicKey, alg) };
}

// The algorithm a PEM private key can sign with (an EC key of any encoding,
// PKCS#8 included, is ES256); undefined when it is not a private key.
export function signingAlgOf(pem: string): SigningAlg | undefined {
  try {
    return createPrivateKey({ key: pem, format: "pem" }).asymmetricKeyType === "ec" ? "ES256" : "RS256";
  } catch {
    return undefined;
  }
}

// A key the customer brings (an authorization server that issues the pair).
// Returns why it cannot serve `alg`, or the pair.
export async function importSigningKey(pem: string, alg: SigningAlg): Promise<SigningKeyPair | string> {
  let key: KeyObject;
  try {
    key = createPrivateKey({ key: pem, format: "pem" });
  } catch {
    return "is not a PEM private key";
  }
  const details = key.asymmetricKeyDetails ?? {};
  if (alg === "RS256" && (key.asymmetricKeyType !== "rsa" || (details.modulusLength ?? 0) < 2048))
    return "must be an RSA key of at least 2048 bits for RS256";
  if (alg === "ES256" && (key.asymmetricKeyType !== "ec" || details.namedCurve !== "prime256v1"))
    return "must be a P-256 EC key for ES256";
  return {
    privateKeyPem: key.export({ format: "pem", type: "pkcs8" }) as string,
    publicJwk: await publicJwkOf(createPublicKey(key), alg),
  };
}
