/**
 * What a creation's embedding is made from when none is supplied: its name and the prompt that
 * made it (`args.prompt`), which is what people remember and type when they look for it.
 */
export function creationText(creation: { name: string; args: unknown }): string {
  const args = creation.args as { prompt?: unknown } | null;
  const prompt = typeof args?.prompt === 'string' ? args.prompt.trim() : '';
  return prompt && !creation.name.includes(prompt) ? `${creation.name}. ${prompt}` : creation.name;
}
