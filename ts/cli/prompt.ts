/** Reads a password: a hidden prompt on a terminal, otherwise the first line of stdin. Never an argument. */

const readStdinLine = async (): Promise<string> => {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) {
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks).toString('utf8').split(/\r?\n/)[0] ?? '';
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
  (process.stdin.isTTY ? readHidden(promptArg) : readStdinLine());
