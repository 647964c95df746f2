import { format } from 'node:util';

/**
 * What a command reads its settings from and writes to. A process's own by default; a test (or
 * any caller) that runs a command as a function in its own process hands it others, so a
 * command's answer and settings never pass through the caller's globals.
 */
export interface CliIo {
  env: NodeJS.ProcessEnv;
  stdout: NodeJS.WritableStream;
  /** Messages, notices and progress; a terminal here gets a progress bar. */
  stderr: NodeJS.WritableStream & { isTTY?: boolean };
}

export const processIo = (): CliIo => ({ env: process.env, stdout: process.stdout, stderr: process.stderr });

/** A line of the command's answer. */
export const say = (io: CliIo, ...parts: unknown[]) => void io.stdout.write(`${format(...parts)}\n`);

/** A line about the run: an error, a notice. */
export const warn = (io: CliIo, ...parts: unknown[]) => void io.stderr.write(`${format(...parts)}\n`);
