import type { Config } from '../config.ts';
import type { Connector } from '../domain/deployments/ports.ts';
import { telegramConnector } from './telegram/connector.ts';

/** The platforms agents can be deployed to: one connector each (Telegram today). */
export const connectorsFor = (config: Pick<Config, 'deployments'>): Connector[] => [telegramConnector(config.deployments.telegram)];
