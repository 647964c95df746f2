import { modelProfiles, ownerPaysValues, thinkingEffortCaps, thinkingPolicies } from '../../domain/agents/index.ts';
import { autonomyStopReasons } from '../../domain/core/events.ts';
import { sortDirections } from '../../domain/search/index.ts';
import { outputTypes, taskOrders, taskTypes } from '../../domain/tasks/index.ts';
import {
  ActorSelection,
  BalanceKind,
  CreatorType,
  DeploymentPlatform,
  MessageRole,
  MessageStatus,
  SessionPermission,
  SessionStatus,
  TaskStatus,
  ToolApprovalState,
  TriggerStatus,
  WhileReplying,
} from '../../domain/core/vocabulary.ts';
import { builder } from '../builder.ts';

/** GraphQL enum values are UPPER_CASE; the domain, the database and REST use the lowercase originals. */
const upper = <const T extends string>(values: readonly T[]) =>
  Object.fromEntries(values.map((v) => [v.toUpperCase(), { value: v }])) as { [K in T as Uppercase<K>]: { value: K } };

export const CreatorTypeEnum = builder.enumType('CreatorType', { values: upper(Object.values(CreatorType)) });
export const OwnerPaysEnum = builder.enumType('OwnerPays', { values: upper(ownerPaysValues) });
export const ModelProfileEnum = builder.enumType('ModelProfile', { values: upper(modelProfiles) });
export const ThinkingPolicyEnum = builder.enumType('ThinkingPolicy', { values: upper(thinkingPolicies) });
export const ThinkingEffortCapEnum = builder.enumType('ThinkingEffortCap', { values: upper(thinkingEffortCaps) });
export const DeploymentPlatformEnum = builder.enumType('DeploymentPlatform', { values: upper(Object.values(DeploymentPlatform)) });
export const TriggerStatusEnum = builder.enumType('TriggerStatus', { values: upper(Object.values(TriggerStatus)) });
export const SessionStatusEnum = builder.enumType('SessionStatus', { values: upper(Object.values(SessionStatus)) });
export const MessageRoleEnum = builder.enumType('MessageRole', { values: upper(Object.values(MessageRole)) });
export const BalanceKindEnum = builder.enumType('BalanceKind', { values: upper(Object.values(BalanceKind)) });
export const MessageStatusEnum = builder.enumType('MessageStatus', { values: upper(Object.values(MessageStatus)) });
export const WhileReplyingEnum = builder.enumType('WhileReplying', {
  description: 'What a prompt does while an agent of the session is still replying.',
  values: {
    REJECT: { value: WhileReplying.reject, description: 'Refused (CONFLICT, naming the replies under way); nothing is saved.' },
    ENQUEUE: { value: WhileReplying.enqueue, description: 'Answered after the replies under way, in order (the default).' },
    INTERRUPT: {
      value: WhileReplying.interrupt,
      description: 'The replies under way stop at once, kept as INTERRUPTED with their text; the prompt is answered with it in context.',
    },
    ROLLBACK: {
      value: WhileReplying.rollback,
      description:
        'The replies under way stop and are removed (ReplyRemoved), their running tools refunded; answered as if they never ran.',
    },
  } as const,
});
export const SessionPermissionEnum = builder.enumType('SessionPermission', { values: upper(Object.values(SessionPermission)) });
export const ToolCallStatusEnum = builder.enumType('ToolCallStatus', { values: upper(Object.values(TaskStatus)) });
export const ToolApprovalStateEnum = builder.enumType('ToolApprovalState', {
  description: 'Where a tool call\'s approval stands (docs/sessions.md, "Tool calls that wait for approval").',
  values: upper(Object.values(ToolApprovalState)),
});
export const TaskStatusEnum = builder.enumType('TaskStatus', { values: upper(Object.values(TaskStatus)) });
export const OutputTypeEnum = builder.enumType('OutputType', { values: upper(outputTypes) });
export const TaskTypeEnum = builder.enumType('TaskType', {
  values: {
    CREATIONS: { value: taskTypes[0], description: 'Tools that make creations (every one but trainings).' },
    CONCEPTS: { value: taskTypes[1], description: 'Trainings, which make concepts (LoRAs).' },
  } as const,
});
export const TaskOrderEnum = builder.enumType('TaskOrder', {
  values: { CREATED_AT: { value: taskOrders[0] }, UPDATED_AT: { value: taskOrders[1] } } as const,
});
export const SortDirectionEnum = builder.enumType('SortDirection', { values: upper(sortDirections) });
export const ActorSelectionEnum = builder.enumType('ActorSelection', { values: upper(Object.values(ActorSelection)) });
export const AutonomyStopReasonEnum = builder.enumType('AutonomyStopReason', { values: upper(autonomyStopReasons) });
export const CreationSearchOrderEnum = builder.enumType('CreationSearchOrder', {
  values: {
    SCORE: { value: 'score', description: 'Similarity to the query.' },
    CREATED_AT: { value: 'createdAt' },
    LIKE_COUNT: { value: 'likeCount' },
  } as const,
});
