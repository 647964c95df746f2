/**
 * PostgreSQL text cannot hold the NUL character, so an id containing one names nothing; lookups
 * skip the database for it and answer "not found" like for any other unknown id.
 */
export const canNameARow = (id: string) => !id.includes('\u0000');
