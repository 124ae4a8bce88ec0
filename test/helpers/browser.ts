import * as fs from 'node:fs';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { chromium, type BrowserContext, type Page } from 'playwright-core';

/**
 * Headless Chromium from Debian's `chromium` package, driven by playwright-core (nothing is
 * downloaded): a fresh profile directory per launch, removed on close. Used by the dashboard's
 * browser test, benchmark and screenshot script.
 */

export const chromiumPath = process.env.CLOUDLY_CHROMIUM ?? '/usr/bin/chromium';

export const chromiumArgs = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

export const chromiumAvailable = (): boolean => fs.existsSync(chromiumPath);

export interface IBrowser {
  context: BrowserContext;
  page: Page;
  close(): Promise<void>;
}

/**
 * `singleProcess` (the default) runs Chromium's renderer, GPU and network service as threads of
 * one process instead of a process each: the three browser test files cost a few CPU-seconds less
 * (docs/testing.md). The dashboard's benchmark opts out, to time pages as a browser usually runs.
 */
export const launchBrowser = async (optionsArg: { viewport?: { width: number; height: number }; singleProcess?: boolean } = {}): Promise<IBrowser> => {
  const userDataDir = await fsp.mkdtemp(path.join(os.tmpdir(), 'cloudly-chromium-'));
  // playwright-core takes the profile directory itself (it refuses --user-data-dir in args).
  const context = await chromium.launchPersistentContext(userDataDir, {
    executablePath: chromiumPath,
    headless: true,
    args: optionsArg.singleProcess === false ? chromiumArgs : [...chromiumArgs, '--single-process'],
    viewport: optionsArg.viewport ?? { width: 1366, height: 768 },
  });
  const page = context.pages()[0] ?? await context.newPage();
  return {
    context,
    page,
    async close() {
      await context.close().catch(() => undefined);
      await fsp.rm(userDataDir, { recursive: true, force: true });
    },
  };
};

/** Collects every console error and uncaught page error of `pageArg` into `sinkArg` (a test asserts it stays empty). */
export const recordPageErrors = (pageArg: Page, sinkArg: string[]): void => {
  pageArg.on('console', (messageArg) => {
    if (messageArg.type() === 'error') {
      sinkArg.push(messageArg.text());
    }
  });
  pageArg.on('pageerror', (errorArg) => sinkArg.push(`pageerror: ${errorArg.message}`));
};

/**
 * Logs in on the dashboard's form as `usernameArg` (logging the open session out first) and waits
 * until the fleet page is shown over a live admin socket.
 */
export const logInToDashboard = async (pageArg: Page, baseUrlArg: string, usernameArg: string, passwordArg: string): Promise<void> => {
  if (await pageArg.locator('[data-action=logout]').count() > 0) {
    await pageArg.locator('[data-action=logout]').click();
  }
  await pageArg.goto(`${baseUrlArg}/dashboard/`);
  await pageArg.getByLabel('Username').fill(usernameArg);
  await pageArg.getByLabel('Password').fill(passwordArg);
  await pageArg.getByRole('button', { name: 'Log in' }).click();
  await pageArg.locator('[data-page=fleet]').waitFor();
  await pageArg.locator('[data-connection=live]').waitFor({ timeout: 15_000 });
};
