import { createCipheriv, createDecipheriv, randomBytes } from "node:crypto";

// AES-256-GCM for secrets at rest. The sealed form is `v1.<iv>.<tag>.<ct>`
// (base64url). The additional data binds a ciphertext to its record and field,
// so a sealed value copied into another row does not open.
export class SecretBox {
  readonly #key: Buffer;

  constructor(key: Buffer) {
    if (key.length !== 32) throw new Error("secret key must be 32 bytes (AES-256)");
    this.#key = key;
  }

  static fromBase64(encoded: string): SecretBox {
    return new SecretBox(Buffer.from(encoded, "base64"));
  }

  seal(plaintext: string, context: string): string {
    const iv = randomBytes(12);
    const cipher = createCipheriv("aes-256-gcm", this.#key, iv);
    cipher.setAAD(Buffer.from(context));
    const ct = Buffer.concat([cipher.update(plaintext, "utf8"), cipher.final()]);
    return ["v1", iv, cipher.getAuthTag(), ct].map((p) => (typeof p === "string" ? p : p.toString("base64url"))).join(".");
  }

  open(sealed: string, context: string): string {
    const [version, iv, tag, ct] = sealed.split(".");
    if (version !== "v1" || iv === undefined || tag === undefined || ct === undefined)
      throw new Error("unknown sealed secret format");
    const decipher = createDecipheriv("aes-256-gcm", this.#key, Buffer.from(iv, "base64url"));
    decipher.setAAD(Buffer.from(context));
    decipher.setAuthTag(Buffer.from(tag, "base64url"));
    return Buffer.concat([decipher.update(Buffer.from(ct, "base64url")), decipher.final()]).toString("utf8");
  }
}
