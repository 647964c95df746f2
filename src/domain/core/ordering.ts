/** Lists come newest first; the id breaks ties between rows created in the same millisecond. */
export const newestFirst = [{ createdAt: 'desc' as const }, { id: 'desc' as const }];
