import type { TypedDocumentNode } from '@graphql-typed-document-node/core';
import { print } from 'graphql';
import { expect } from 'vitest';
import type { GraphQLResponse, TestApp } from '../helpers/app.ts';
import { expectNoInternals, rawRequest } from '../helpers/rest-helpers.ts';

type GraphQLErrors = GraphQLResponse<unknown>['errors'];

/** Beyond what no response may show (`expectNoInternals`): SQL, driver names and stacks in GraphQL errors. */
const graphqlInternals = [/prisma/i, /\bselect\b.*\bfrom\b/i, /\binsert into\b/i, /\bupdate\s+"/i, /postgres|pglite/i, /stack/i];

/** The message and extensions of every error carry no stack, SQL or driver names. */
export function expectCleanErrors(errors: GraphQLErrors) {
  expect(errors?.length).toBeGreaterThan(0);
  for (const error of errors!) {
    const text = JSON.stringify(error);
    expectNoInternals(text);
    for (const pattern of graphqlInternals) expect(text).not.toMatch(pattern);
    expect(error.extensions ?? {}).not.toHaveProperty('stacktrace');
    expect(error.extensions ?? {}).not.toHaveProperty('originalError');
    expect(error.message.length).toBeGreaterThan(0);
  }
}

/** Asserts a single error with this code (and a clean message); returns it for further checks. */
export function expectGraphQLError(response: GraphQLResponse<unknown>, code: string) {
  expect(response.errors, `expected a ${code} error, got ${JSON.stringify(response)}`).toBeDefined();
  expect(response.errors![0]!.extensions?.code).toBe(code);
  expectCleanErrors(response.errors);
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
  const { status, text } = await rawRequest(t, 'POST', '/graphql', {
    key,
    headers: { 'content-type': 'application/json', accept: 'application/graphql-response+json, application/json' },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  let json: any;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status, text, json };
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
