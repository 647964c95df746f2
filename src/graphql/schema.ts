import { lexicographicSortSchema } from 'graphql';
import { builder } from './builder.ts';
import './scalars.ts';
import './types/agent.ts';
import './types/api-key.ts';
import './types/concept.ts';
import './types/creation.ts';
import './types/creation-search.ts';
import './types/creator.ts';
import './types/deployment.ts';
import './types/message.ts';
import './types/model.ts';
import './types/session.ts';
import './types/session-event.ts';
import './types/share.ts';
import './types/tool.ts';
import './types/trigger.ts';

export const schema = lexicographicSortSchema(builder.toSchema());
