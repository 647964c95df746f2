import { decodeBase64, encodeBase64 } from '@pothos/core';

const globalIdShape = /^([A-Z][A-Za-z]*):(.+)$/s;
const base64Shape = /^[A-Za-z0-9+/]+={0,2}$/;

/**
 * The database id inside a Relay global id (`base64("Type:rawId")`), or the value itself when it
 * is not one, so every id argument takes either form. A raw id (a UUID, a share id, a tool key)
 * is never canonical base64 of `Type:...`, which is checked by re-encoding, so the two cannot be
 * confused.
 */
export function rawIdOf(id: string): string {
  return decodeGlobal(id)?.id ?? id;
}

/** The type name and raw id of a well-formed global id, or null. */
export function decodeGlobal(id: string): { typename: string; id: string } | null {
  // Raw ids (UUIDs, with their dashes) are most of what clients send: they are told apart here
  // rather than by the decoder's exception, which costs a stack trace each.
  if (!base64Shape.test(id)) return null;
  let text: string;
  try {
    text = decodeBase64(id);
  } catch {
    return null;
  }
  const match = globalIdShape.exec(text);
  if (!match || encodeBase64(text) !== id) return null;
  return { typename: match[1]!, id: match[2]! };
}
