import { cliIo } from './io.js';

/**
 * Reads passwords: a hidden prompt on a terminal, otherwise lines of stdin. Never an argument.
 * A hidden prompt needs the process's own terminal (raw mode), so it reads process.stdin.
 */

const readStdinLines = async (): Promise<string[]> => {
  const chunks: Buffer[] = [];
  for await (const chunk of cliIo().stdin) {
    chunks.push(Buffer.from(chunk));
  }
  return Buffer.concat(chunks).toString('utf8').split(/\r?\n/);
};

const readHidden = (promptArg: string): Promise<string> => new Promise((resolve, reject) => {
  const stdin = process.stdin;
  process.stderr.write(promptArg);
  stdin.setRawMode(true);
  stdin.resume();
  stdin.setEncoding('utf8');
  let value = '';
  const finish = (errorArg?: Error): void => {
    stdin.setRawMode(false);
    stdin.pause();
    stdin.removeListener('data', onData);
    process.stderr.write('\n');
    if (errorArg) {
      reject(errorArg);
    } else {
      resolve(value);
    }
  };
  const onData = (textArg: string): void => {
    for (const character of textArg) {
      if (character === '\r' || character === '\n' || character === '\u0004') {
        finish();
        return;
      }
      if (character === '\u0003') {
        finish(new Error('interrupted'));
        return;
      }
      if (character === '\u007f' || character === '\b') {
        value = value.slice(0, -1);
      } else if (character >= ' ') {
        value += character;
      }
    }
  };
  stdin.on('data', onData);
});

export const readPassword = async (promptArg: string): Promise<string> =>
  (cliIo().stdin.isTTY ? readHidden(promptArg) : (await readStdinLines())[0] ?? '');

/**
 * Several secrets: on a terminal one hidden prompt each (`confirmArg` asks the last one twice and
 * they must match); otherwise one line of stdin each, in order.
 */
export const readSecrets = async (promptsArg: string[], confirmArg?: string): Promise<string[]> => {
  if (!cliIo().stdin.isTTY) {
    const lines = await readStdinLines();
    return promptsArg.map((_promptArg, indexArg) => lines[indexArg] ?? '');
  }
  const values: string[] = [];
  for (const prompt of promptsArg) {
    values.push(await readHidden(prompt));
  }
  if (confirmArg && (await readHidden(confirmArg)) !== values.at(-1)) {
    throw new Error('the two entries differ');
  }
  return values;
};

/**
 * Asks a yes/no question on stderr and reads one line of the terminal: true for `y` or `yes`
 * (any case), false for anything else, an empty line or the end of input.
 */
export const confirm = async (questionArg: string): Promise<boolean> => {
  const { stderr, stdin } = cliIo();
  stderr.write(`${questionArg} [y/N] `);
  let typed = '';
  for await (const chunk of stdin) {
    typed += chunk.toString();
    if (typed.includes('\n')) {
      break;
    }
  }
  return /^(y|yes)$/i.test(typed.split(/\r?\n/)[0].trim());
};
