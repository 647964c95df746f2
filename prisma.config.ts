import { defineConfig } from 'prisma/config';

// The CLI is only used for `generate` here (migrations are applied by `parley migrate`, which
// runs offline); production may still run `prisma migrate deploy` with DATABASE_URL set.
export default defineConfig({
  schema: 'prisma/schema.prisma',
  migrations: { path: 'prisma/migrations' },
  datasource: { url: process.env.DATABASE_URL ?? 'postgresql://localhost/parley' },
});
