/** The API keys service's front: its rules and the store they are composed over. */
export { prismaApiKeyStore } from './prisma-store.ts';
export { apiKeyService } from './service.ts';
export type { ApiKeyService } from './service.ts';
