import type { CodegenConfig } from '@graphql-codegen/cli';

// Typed documents for the tests, from the committed SDL (so codegen never needs a running server).
const config: CodegenConfig = {
  schema: 'schema/schema.graphql',
  documents: ['test/**/*.ts', '!test/graphql/generated/**'],
  ignoreNoDocuments: true,
  generates: {
    'test/graphql/generated/': {
      preset: 'client',
      presetConfig: { fragmentMasking: false },
      config: { useTypeImports: true, enumsAsTypes: true, scalars: { DateTime: 'string', JSON: 'unknown', Seq: 'number' } },
    },
  },
};

export default config;
