import { z } from 'zod';
import type { McpServerView, McpTool } from '../domain/mcp-servers/index.ts';
import type { RestErrorStyle } from '../http/errors.ts';
import { fieldNames } from './field-names.ts';

/** An MCP server's REST names: snake_case, as the rest of `/v2`; header names inside `headers` are left as sent. */
export const mcpServerNames = fieldNames({ pricePerCall: 'price_per_call', hasAuthorization: 'has_authorization' });

export const mcpServerErrors: RestErrorStyle = { bodyKey: 'error', fieldName: mcpServerNames.toRest };

export const restMcpServerSchema = z
  .object({
    id: z.string(),
    name: z.string().meta({ description: 'The model sees its tools as `<name>__<tool>`' }),
    url: z.string(),
    headers: z
      .record(z.string(), z.string())
      .meta({ description: 'Sent with every request (names lower-cased); never the authorization header' }),
    has_authorization: z.boolean().meta({ description: 'Whether an authorization header is kept, sealed; its value is never shown' }),
    price_per_call: z
      .number()
      .int()
      .meta({ description: 'Manna a call of one of its tools costs, held before the call and charged or given back after' }),
    createdAt: z.string(),
    updatedAt: z.string(),
  })
  .meta({ id: 'McpServer' });

export const toRestMcpServer = (s: McpServerView): z.infer<typeof restMcpServerSchema> => ({
  id: s.id,
  name: s.name,
  url: s.url,
  headers: s.headers,
  has_authorization: s.hasAuthorization,
  price_per_call: s.pricePerCall,
  createdAt: s.createdAt.toISOString(),
  updatedAt: s.updatedAt.toISOString(),
});

export const restMcpToolSchema = z
  .object({
    name: z.string(),
    title: z.string().nullable(),
    description: z.string(),
    input_schema: z.record(z.string(), z.unknown()).meta({ description: "The JSON Schema of the tool's arguments, as the server gave it" }),
  })
  .meta({ id: 'McpTool' });

export const toRestMcpTool = (t: McpTool): z.infer<typeof restMcpToolSchema> => ({
  name: t.name,
  title: t.title,
  description: t.description,
  input_schema: t.inputSchema,
});

export const restMcpServerCreateBody = z.object({
  name: z.string().meta({ description: '1 to 24 lower-case letters, digits, - or _; one per name for each user' }),
  url: z.string().meta({ description: 'The Streamable HTTP endpoint: https, on a public address (`docs/mcp.md`)' }),
  headers: z
    .record(z.string(), z.string())
    .optional()
    .meta({ description: 'Sent with every request; an Authorization header is sealed and never shown again' }),
  price_per_call: z.number().int().min(0).max(1_000_000).optional().meta({ description: '0 unless given' }),
});

export const restMcpServerPatchBody = restMcpServerCreateBody.partial().extend({
  headers: z
    .record(z.string(), z.string().nullable())
    .optional()
    .meta({ description: 'Changes only the headers named (null removes one), the Authorization header included' }),
});
