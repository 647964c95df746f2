import { Prisma } from '../generated/prisma/client.ts';

/** True when a write failed on a unique constraint (optionally one covering `field`). */
export function isUniqueViolation(e: unknown, field?: string): boolean {
  if (!(e instanceof Prisma.PrismaClientKnownRequestError) || e.code !== 'P2002') return false;
  if (!field) return true;
  const target = (e.meta as { target?: unknown; driverAdapterError?: { cause?: { constraint?: { fields?: string[] } } } } | undefined);
  const fields = target?.driverAdapterError?.cause?.constraint?.fields ?? (Array.isArray(target?.target) ? (target.target as string[]) : []);
  return fields.length === 0 || fields.some((f) => f.replace(/"/g, '') === field);
}
