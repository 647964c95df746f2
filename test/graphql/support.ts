import type { TypedDocumentNode } from '@graphql-typed-document-node/core';
import { print } from 'graphql';
import { expect } from 'vitest';
import type { GraphQLResponse, TestApp } from '../helpers/app.ts';

type GraphQLErrors = GraphQLResponse<unknown>['errors'];

/** Words that would mean an error message or extension leaked implementation details. */
const internals = [
  /prisma/i,
  /\bselect\b.*\bfrom\b/i,
  /\binsert into\b/i,
  /\bupdate\s+"/i,
  /postgres|pglite/i,
  /\bat .*\.(ts|js):\d+/,
  /node_modules/,
  /stack/i,
];

/** The message and extensions of every error carry no stack, SQL or driver names. */
export function expectNoInternals(errors: GraphQLErrors) {
  expect(errors?.length).toBeGreaterThan(0);
  for (const error of errors!) {
    const text = JSON.stringify(error);
    for (const pattern of internals) expect(text).not.toMatch(pattern);
    expect(error.extensions ?? {}).not.toHaveProperty('stacktrace');
    expect(error.extensions ?? {}).not.toHaveProperty('originalError');
    expect(error.message.length).toBeGreaterThan(0);
  }
}

/** Asserts a single error with this code (and a clean message); returns it for further checks. */
export function expectError(response: GraphQLResponse<unknown>, code: string) {
  expect(response.errors, `expected a ${code} error, got ${JSON.stringify(response)}`).toBeDefined();
  expect(response.errors![0]!.extensions?.code).toBe(code);
  expectNoInternals(response.errors);
  return response.errors![0]!;
}

/** A successful response: no errors, data present. */
export function expectData<T>(response: GraphQLResponse<T>): T {
  expect(response.errors, JSON.stringify(response.errors)).toBeUndefined();
  expect(response.status).toBe(200);
  expect(response.data).toBeTruthy();
  return response.data!;
}

/** POSTs any query text (valid or not) and returns the status and the raw response text. */
export async function postRaw(t: TestApp, body: unknown, key?: string | null): Promise<{ status: number; text: string; json: any }> {
  const response = await fetch(`${t.url}/graphql`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'application/graphql-response+json, application/json',
      ...(key ? { 'x-api-key': key } : {}),
    },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await response.text();
  let json: any;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: response.status, text, json };
}

/** A typed document sent through `postRaw`, to look at the exact bytes a client receives. */
export function postDocument<TResult, TVariables>(
  t: TestApp,
  document: TypedDocumentNode<TResult, TVariables>,
  variables: TVariables,
  key?: string | null,
) {
  return postRaw(t, { query: print(document), variables }, key);
}
